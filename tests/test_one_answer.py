"""One answer to one question (issue 42): over every committed recording, `incidents` and
`report` give the same incidents (count, class, device, GPU-seconds lost) for each job.

Usage: python3 -m unittest test_one_answer   (STALLWATCH_BIN names the binary)
       python3 test_one_answer.py --count BIN   (prints the disagreements, for a note)"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
RECORDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings")


def recordings():
    return sorted(glob.glob(os.path.join(RECORDINGS, "**", "*.db"), recursive=True))


def disagreements(binary, db, tmp):
    """The jobs whose incidents differ between `incidents --json` and `report --json`."""
    copy = os.path.join(tmp, "r.db")
    for f in glob.glob(copy + "*"):
        os.remove(f)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            shutil.copy(db + suffix, copy + suffix)

    def run(*args):
        r = subprocess.run([binary, "--log-level", "off", *args, "--db", copy, "--json"], capture_output=True,
                           text=True, timeout=120)
        return json.loads(r.stdout) if r.returncode == 0 else None

    report, incidents = run("report"), run("incidents")
    if report is None or incidents is None:
        return ["unreadable"]
    key = lambda i: (i["class"], i["device"], round(i["gpu_seconds_lost"], 6))  # noqa: E731
    out = []
    for job in report:
        said = sorted(key(i) for i in job["incidents"])
        listed = sorted(key(i) for i in incidents if i["job_id"] == job["job_id"])
        if said != listed:
            out.append(f"job {job['job_id']}: report {said} against incidents {listed}")
    return out


class OneAnswer(unittest.TestCase):
    def test_incidents_and_report_agree_on_every_committed_recording(self):
        tmp = tempfile.mkdtemp(prefix="stallwatch-one-answer-")
        self.addCleanup(shutil.rmtree, tmp, True)
        found = {}
        for db in recordings():
            d = disagreements(BIN, db, tmp)
            if d:
                found[os.path.relpath(db, RECORDINGS)] = d
        self.assertGreater(len(recordings()), 50)
        self.assertEqual(found, {})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--count":
        tmp = tempfile.mkdtemp()
        bad = [db for db in recordings() if disagreements(sys.argv[2], db, tmp)]
        print(f"{len(bad)} of {len(recordings())} recordings disagree")
        for db in bad:
            print("  " + os.path.relpath(db, RECORDINGS))
        shutil.rmtree(tmp, True)
    else:
        unittest.main()
