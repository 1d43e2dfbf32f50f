"""End-to-end tests of storage targets that are mounts, for real: a job reading through a FUSE
filesystem (tests/fuse/swslowfs.cpp) whose reads are made slow for a window, and a job in a
container-like setup (an overlay whose lower layer is on ext4 on a loop device) whose loop
device is made slow the same way (its image lives on the slow FUSE filesystem). The agent
records beside the job; the report must name the mount, what serves it, and the devices under
it, within 2 s of the window; a healthy run must have no incident."""

import json
import swjson
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
SLOWFS = os.environ.get("SWSLOWFS_BIN", "../build/tests/swslowfs")
PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
FUSECTL = "/sys/fs/fuse/connections"

# A job shaped like a DataLoader over sharded data (webdataset, LMDB): the shards stay open,
# 4 workers read 8 random 64 KiB samples per step with O_DIRECT (no page cache: every read
# reaches the storage), then the step computes for 20 ms. Reports through the dataloader hook.
JOB = r"""
import mmap, os, random, sys, time
from concurrent.futures import ThreadPoolExecutor
import stallwatch
duration = float(sys.argv[1])
shards = [os.open(p, os.O_RDONLY | os.O_DIRECT) for p in sys.argv[2:]]
size = os.fstat(shards[0]).st_size
pool = ThreadPoolExecutor(4)
buffers = {}
def read_sample(_):
    buf = buffers.setdefault(os.getpid() * 1000 + __import__("threading").get_ident() % 1000,
                             mmap.mmap(-1, 65536))
    offset = random.randrange(0, size // 65536) * 65536
    os.preadv(random.choice(shards), [buf], offset)
def batches():
    end = time.time() + duration
    while time.time() < end:
        list(pool.map(read_sample, range(8)))
        yield 8
for batch in stallwatch.watch(batches()):
    time.sleep(0.02)
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class MountsE2E(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            self.skipTest("needs root and /dev/fuse")
        if not os.path.ismount(FUSECTL):
            run(["mount", "-t", "fusectl", "none", FUSECTL])
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-mounts-")
        self.cleanups = []
        self.src = os.path.join(self.tmp, "src")
        self.mnt = os.path.join(self.tmp, "slowfs")
        self.delay = os.path.join(self.tmp, "delay_ms")
        os.makedirs(self.src)
        os.makedirs(self.mnt)
        with open(self.delay, "w") as f:
            f.write("0\n")
        run([SLOWFS, self.src, self.mnt, "--delay-file", self.delay,
             "-o", "fsname=swslowfs,subtype=swslowfs"])
        self.cleanups.append(["umount", "-l", self.mnt])

    def tearDown(self):
        for cmd in reversed(self.cleanups):
            subprocess.run(cmd, capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make_shards(self, directory, count=4, mib=16):
        paths = []
        for i in range(count):
            path = os.path.join(directory, f"shard{i}")
            with open(path, "wb") as f:
                f.write(os.urandom(mib << 20))
            paths.append(path)
        return paths

    def record_job(self, shards, duration_s, slow_window=None, agent_args=()):
        """Runs the agent and the job; with SLOW_WINDOW (from, to) seconds after the job
        starts, reads through swslowfs take 100 ms in that window. Returns the report's JSON
        and the window in epoch ms."""
        db = os.path.join(self.tmp, "sw.db")
        sock = os.path.join(self.tmp, "dl.sock")
        agent = subprocess.Popen(
            [BIN, "record", "--db", db, "--socket", sock, "--no-collector.gpu", *agent_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        env = dict(os.environ, PYTHONPATH=PACKAGE, STALLWATCH_SOCKET=sock)
        job = subprocess.Popen([sys.executable, "-c", JOB, str(duration_s), *shards], env=env,
                               stderr=subprocess.PIPE, text=True)
        start = time.time()
        window_ms = None
        if slow_window:
            time.sleep(max(0, start + slow_window[0] - time.time()))
            with open(self.delay, "w") as f:
                f.write("100\n")
            t0 = time.time()
            time.sleep(max(0, start + slow_window[1] - time.time()))
            with open(self.delay, "w") as f:
                f.write("0\n")
            window_ms = (int(t0 * 1000), int(time.time() * 1000))
        _, job_err = job.communicate(timeout=duration_s + 60)
        self.assertEqual(job.returncode, 0, job_err)
        time.sleep(2)
        agent.terminate()
        _, err = agent.communicate(timeout=30)
        self.assertEqual(agent.returncode, 0, err)
        report = run([BIN, "report", "--db", db, "--json"])
        text = run([BIN, "report", "--db", db]).stdout
        return swjson.loads(report.stdout), text, window_ms

    def only_job(self, report):
        jobs = [j for j in report if j["progress_signal"] == "steps"]
        self.assertEqual(len(jobs), 1, json.dumps(report)[:2000])
        return jobs[0]

    def test_fuse_healthy_has_no_incident(self):
        shards = self.make_shards(self.src)
        report, text, _ = self.record_job([os.path.join(self.mnt, os.path.basename(s))
                                           for s in shards], 30)
        job = self.only_job(report)
        self.assertEqual(job["incidents"], [], text)
        devices = {d["device"]: d for d in job["devices"]}
        self.assertIn(self.mnt, devices, text)  # the mount is one of the job's targets
        self.assertRegex(devices[self.mnt]["served_by"] or "",
                         r"^fuse: FUSE daemon swslowfs \(pid \d+\)$")

    def test_fuse_slow_names_the_mount_and_its_daemon(self):
        shards = self.make_shards(self.src)
        calls = os.path.join(self.tmp, "hook-calls")
        os.makedirs(calls)
        hook = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hooks",
                            "record-call.sh")
        report, text, window = self.record_job(
            [os.path.join(self.mnt, os.path.basename(s)) for s in shards], 36,
            slow_window=(16, 28), agent_args=["--on-incident", hook, calls])
        job = self.only_job(report)
        self.assertEqual(len(job["incidents"]), 1, text)
        incident = job["incidents"][0]
        self.assertEqual(incident["class"], "disk-slow", text)
        self.assertEqual(incident["device"], self.mnt, text)
        self.assertLessEqual(abs(incident["start_ms"] - window[0]), 2000, text)
        self.assertLessEqual(abs(incident["end_ms"] - window[1]), 2000, text)
        self.assertRegex(text, rf"{self.mnt} is fuse: FUSE daemon swslowfs \(pid \d+\)")
        # Live: the hook is told the mount and what serves it.
        opened = []
        for name in os.listdir(calls):
            if name.endswith(".env"):
                with open(os.path.join(calls, name)) as f:
                    env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
                if env.get("STALLWATCH_EVENT") == "open":
                    opened.append(env)
        self.assertEqual(len(opened), 1, os.listdir(calls))
        self.assertEqual(opened[0]["STALLWATCH_DEVICE"], self.mnt)
        self.assertRegex(opened[0]["STALLWATCH_SERVED_BY"], r"^fuse: FUSE daemon swslowfs \(pid \d+\)$")
        self.assertLessEqual(int(opened[0]["STALLWATCH_START_MS"]) - window[0], 2000)

    def test_a_fuse_mount_points_escapes_never_reach_the_terminal(self):
        """Issue 46: a FUSE mount is a device named by its mount point; one whose path holds ESC
        sequences and a newline is listed made visible, one row, no control character."""
        odd = os.path.join(self.tmp, "odd\x1b]0;pwned\x07\nrow")
        os.makedirs(odd)
        run([SLOWFS, self.src, odd, "--delay-file", self.delay, "-o", "fsname=swslowfs,subtype=swslowfs"])
        self.cleanups.append(["umount", "-l", odd])
        out = subprocess.run([BIN, "devices"], capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn(b"\x1b", out.stdout)
        self.assertNotIn(b"\x07", out.stdout)
        self.assertIn(b"odd\\x1b]0;pwned\\x07\\nrow", out.stdout)
        self.assertFalse(any(line.startswith(b"row") for line in out.stdout.splitlines()))

    def test_overlay_on_a_slow_loop_device_names_the_stack(self):
        # The loop device's image is on the slow FUSE filesystem: slowing its reads slows the
        # loop device, which is what a failing disk under a container's layers looks like.
        image = os.path.join(self.src, "layers.img")
        run(["truncate", "-s", "160M", image])
        run(["mkfs.ext4", "-q", "-F", image])
        staging = os.path.join(self.tmp, "staging")
        os.makedirs(staging)
        run(["mount", "-o", "loop", image, staging])
        os.makedirs(os.path.join(staging, "lower"))
        shards = self.make_shards(os.path.join(staging, "lower"), count=4, mib=24)
        run(["umount", staging])
        loop = run(["losetup", "-f", "--show", "-r", os.path.join(self.mnt, "layers.img")])
        loop = loop.stdout.strip()
        self.cleanups.append(["losetup", "-d", loop])
        layers = os.path.join(self.tmp, "layers")
        os.makedirs(layers)
        run(["mount", "-o", "ro,noload", loop, layers])
        self.cleanups.append(["umount", "-l", layers])
        upper = os.path.join(self.tmp, "upper")
        os.makedirs(upper)
        run(["mount", "-t", "tmpfs", "tmpfs", upper])
        self.cleanups.append(["umount", "-l", upper])
        os.makedirs(os.path.join(upper, "up"))
        os.makedirs(os.path.join(upper, "work"))
        merged = os.path.join(self.tmp, "merged")
        os.makedirs(merged)
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={layers}/lower,upperdir={upper}/up,workdir={upper}/work", merged])
        self.cleanups.append(["umount", "-l", merged])
        report, text, window = self.record_job(
            [os.path.join(merged, os.path.basename(s)) for s in shards], 36, slow_window=(16, 28))
        job = self.only_job(report)
        self.assertEqual(len(job["incidents"]), 1, text)
        incident = job["incidents"][0]
        self.assertEqual(incident["class"], "disk-slow", text)
        self.assertEqual(incident["device"], merged, text)
        loop_name = os.path.basename(loop)
        self.assertIn(incident["physical_device"], (loop_name, self.mnt), text)
        self.assertLessEqual(abs(incident["start_ms"] - window[0]), 2000, text)
        # The overlay has no figures of its own: it is named by the incident and by the
        # devices under it, each listed with its latency.
        self.assertIn(f"{merged} is overlay: overlay over {loop_name} (and layers in memory)\n",
                      text)
        devices = {d["device"]: d for d in job["devices"]}
        self.assertEqual(devices[loop_name]["via"], merged, text)
        self.assertEqual(devices[self.mnt]["via"], merged, text)  # the "disk" under the loop


if __name__ == "__main__":
    unittest.main()
