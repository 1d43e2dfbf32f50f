"""Replays the real recordings of issue 7's runs (tests/gpu/stall_runs.sh on an H200) through
the correlator and checks the verdicts: the slowed-disk run gives a disk-slow incident naming
the loop device and the disk under it, covering the injected window within 2 s at each end;
the healthy run gives none; the CPU-starved run blames no disk."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
RECORDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings")


class GpuRecordings(unittest.TestCase):
    def replay(self, run):
        tmp = tempfile.mkdtemp(prefix="stallwatch-replay-")
        self.addCleanup(shutil.rmtree, tmp, True)
        db = os.path.join(tmp, "run.db")
        shutil.copy(os.path.join(RECORDINGS, f"h200-stall-{run}.db"), db)
        with open(os.path.join(RECORDINGS, f"h200-stall-{run}.window")) as f:
            window = tuple(map(int, f.read().split()))
        out = subprocess.run([BIN, "report", "--db", db, "--json"], capture_output=True, text=True,
                             check=True).stdout
        reports = json.loads(out)
        self.assertEqual(len(reports), 1, "one job in each run")
        stored = json.loads(subprocess.run([BIN, "incidents", "--db", db, "--recompute", "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        self.assertEqual(len(stored), len(reports[0]["incidents"]), "report and incidents agree")
        return reports[0], window

    def test_disk_slowdown(self):
        report, (t_in, t_out) = self.replay("disk")
        disk = [i for i in report["incidents"] if i["class"] == "disk-slow"]
        self.assertEqual(len(disk), 1, report["incidents"])
        self.assertEqual(disk[0]["device"], "loop0")
        self.assertEqual(disk[0]["physical_device"], "vda")
        self.assertLessEqual(abs(disk[0]["start_ms"] - t_in), 2000)
        self.assertLessEqual(abs(disk[0]["end_ms"] - t_out), 2000)

    def test_healthy(self):
        report, _ = self.replay("healthy")
        self.assertEqual(report["incidents"], [])

    def test_cpu_starved_input_blames_no_disk(self):
        report, (t_in, t_out) = self.replay("cpu")
        for incident in report["incidents"]:
            self.assertNotEqual(incident["class"], "disk-slow")
            self.assertIsNone(incident["device"])
        # And it says what it was.
        self.assertEqual([i["class"] for i in report["incidents"]], ["input-cpu"])


if __name__ == "__main__":
    unittest.main()
