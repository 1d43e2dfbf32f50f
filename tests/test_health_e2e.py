"""End-to-end tests of `stallwatch health`: this host's drives, smartctl dumps of real drives,
and what `stallwatch record` recorded."""

import glob
import json
import swjson
import os
import shutil
import subprocess
import tempfile
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
HERE = os.path.dirname(os.path.abspath(__file__))
SMARTCTL = os.path.join(HERE, "fixtures", "smartctl")


def smart_capable_disks():
    """Whole disks this host could have SMART on (what the agent would try to read)."""
    names = os.listdir("/sys/block")
    return [n for n in names if n.startswith(("sd", "hd", "nvme"))]


class HealthE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-health-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sw(self, *args, rc=0):
        r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, rc, r.stdout + r.stderr)
        return r

    def test_this_host(self):
        r = self.sw("health")
        if smart_capable_disks():
            self.assertIn("VERDICT", r.stdout)
        else:
            # The development and GPU hosts: virtio disks only. Said plainly, exit 0.
            self.assertIn("no SMART-capable drives on this host", r.stdout)
            for name in os.listdir("/sys/block"):
                if name.startswith("vd"):
                    self.assertIn(f"{name}: virtio disk: no SMART", r.stdout)

    def test_smartctl_dumps_of_real_drives(self):
        # Exit status as a bit mask, like smartctl's: 8 a failing drive, 32 a warning among them.
        out = swjson.loads(self.sw("health", "--json", "--smartctl-json", SMARTCTL, rc=8 | 32).stdout)
        self.assertEqual(len(out), len(glob.glob(os.path.join(SMARTCTL, "*.json"))))
        by_file = {o["device"]: o for o in out}
        failed = by_file["ata-hdd-hitachi-hds721050dle630-failed-realloc1975-pending8-errlog56-usb-bridge.json"]
        self.assertEqual(failed["verdict"], "failing")
        counters = [e["counter"] for e in failed["evidence"]]
        self.assertIn("overall status", counters)
        self.assertIn("ata 5 Reallocated_Sector_Ct raw", counters)
        self.assertEqual(by_file["nvme-samsung-970-evo-500gb-media-errors7.json"]["verdict"], "warning")
        self.assertEqual(by_file["scsi-seagate-st4000nm0043-grown-defects56.json"]["verdict"], "warning")
        self.assertEqual(by_file["nvme-micron-7450-mtfdkcb3t8tfr-healthy.json"]["verdict"], "ok")
        self.assertIn("smartctl --scan", by_file["smartctl-scan-megaraid.json"]["note"])
        self.assertIn("Open failed", by_file["smartctl-error-open-failed-windows.json"]["note"])
        self.assertEqual(sum(1 for o in out if o["verdict"] == "failing"), 1)

    def test_bad_input_is_a_clear_error(self):
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        r = self.sw("health", "--smartctl-json", bad, rc=1)
        self.assertIn("bad.json: not JSON", r.stderr)
        r = self.sw("health", "--smartctl-json", os.path.join(self.tmp, "missing.json"), rc=2)  # a usage error: the path does not exist
        self.assertIn("missing.json", r.stderr)

    def test_hostile_input_is_bounded_and_skipped_per_file(self):
        healthy = os.path.join(SMARTCTL, "nvme-micron-7450-mtfdkcb3t8tfr-healthy.json")
        folder = os.path.join(self.tmp, "dumps")
        os.mkdir(folder)
        shutil.copy(healthy, folder)
        os.symlink("loop.json", os.path.join(folder, "loop.json"))  # a link to itself
        fifo = os.path.join(self.tmp, "pipe.json")
        os.mkfifo(fifo)
        # A FIFO no one writes to, /dev/zero, and a folder with a link loop: each said and
        # skipped (status bit 1), the healthy drive still judged (no other bit), all at once.
        r = subprocess.run([BIN, "health", "--json", "--smartctl-json", fifo, "/dev/zero", folder],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("pipe.json: not a regular file", r.stderr)
        self.assertIn("/dev/zero: not a regular file", r.stderr)
        self.assertIn("loop.json: skipped", r.stderr)
        out = swjson.loads(r.stdout)
        self.assertEqual([(o["device"], o["verdict"]) for o in out],
                         [("nvme-micron-7450-mtfdkcb3t8tfr-healthy.json", "ok")])
        r = self.sw("health", "--smartctl-json", healthy, rc=0)
        self.assertIn("ok", r.stdout)

    def test_recorded_by_the_agent(self):
        db = os.path.join(self.tmp, "sw.db")
        self.sw("record", "--db", db, "--duration", "2s", "--health-interval", "1s", "--no-collector.gpu",
                "--socket", os.path.join(self.tmp, "dl.sock"))
        out = swjson.loads(self.sw("health", "--db", db, "--json").stdout)
        devices = {o["device"]: o["verdict"] for o in out}
        disks = [n for n in os.listdir("/sys/block") if not n.startswith(("loop", "dm-", "md", "sr"))]
        for name in disks:
            self.assertIn(name, devices)
        for name in disks:
            if name.startswith("vd"):
                self.assertEqual(devices[name], "unsupported")
        text = self.sw("health", "--db", db).stdout
        self.assertIn("VERDICT", text)


if __name__ == "__main__":
    unittest.main()
