"""`stallwatch export`: a job's slice of a recording, read by the post-mortem like the whole."""

import hashlib
import json
import swjson
import os
import shutil
import subprocess
import tempfile
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
RECORDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings")


def run(*args, check=True):
    proc = subprocess.run([BIN, "--log-level", "off", *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args}: exit {proc.returncode}: {proc.stderr}")
    return proc


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class ExportE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-export-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def copy(self, name):
        for suffix in ("", "-wal", "-shm"):
            src = os.path.join(RECORDINGS, name + suffix)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(self.tmp, name + suffix))
        return os.path.join(self.tmp, name)

    # Every job of every committed recording: the export's report is the recording's report of
    # that job, byte for byte (incidents, evidence from the other disks, goodput, drive health).
    def test_the_export_reports_like_the_whole_recording(self):
        compared = 0
        for name in sorted(f for f in os.listdir(RECORDINGS) if f.endswith(".db")):
            db = self.copy(name)
            before = sha256(db)
            for job in swjson.loads(run("jobs", "--json", "--db", db).stdout):
                out = os.path.join(self.tmp, f"{name}.job{job['job_id']}.export.db")
                run("export", "--db", db, "--job", str(job["job_id"]), "-o", out)
                whole = run("report", "--json", "--db", db, "--job", str(job["job_id"])).stdout
                part = run("report", "--json", "--db", out).stdout
                self.assertEqual(part, whole, f"{name} job {job['job_id']}")
                listed = swjson.loads(run("jobs", "--json", "--db", out).stdout)
                self.assertEqual([j["key"] for j in listed], [job["key"]])
                # No bigger than the recording but for the schema: an export has every table
                # of this version, which an older recording lacks (a table and an index: 8 KiB).
                self.assertLess(os.path.getsize(out), os.path.getsize(db) + 96 * 1024)
                compared += 1
            self.assertEqual(sha256(db), before, f"{name} was modified by the export")
        self.assertGreater(compared, 10)

    def test_by_run_id_within_a_range(self):
        db = self.copy("h200x2-ddp-rank-disk.db")
        job = swjson.loads(run("jobs", "--json", "--db", db).stdout)[0]
        run_id = job["key"].split(":", 1)[1]  # torchelastic:<TORCHELASTIC_RUN_ID>
        start_s = job["start_ms"] // 1000
        out = os.path.join(self.tmp, "node.db")
        run("export", "--db", db, "--run-id", run_id, "--since", str(start_s + 10), "--until", str(start_s + 30),
            "-o", out)
        report = swjson.loads(run("report", "--json", "--db", out).stdout)
        self.assertEqual(len(report), 1)
        self.assertGreaterEqual(report[0]["start_ms"], (start_s + 10) * 1000)
        self.assertLessEqual(report[0]["end_ms"], (start_s + 30) * 1000)
        self.assertLessEqual(report[0]["intervals"], 21)

    def test_refusals_are_clear_and_leave_no_file(self):
        db = self.copy("h100-disk.db")
        out = os.path.join(self.tmp, "out.db")
        with open(out, "w") as f:
            f.write("someone's file")
        exists = run("export", "--db", db, "--job", "1", "-o", out, check=False)
        self.assertEqual(exists.returncode, 1)
        self.assertIn("exists; not overwriting it", exists.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "someone's file")
        other = os.path.join(self.tmp, "other.db")
        unknown = run("export", "--db", db, "--run-id", "no-such-run", "-o", other, check=False)
        self.assertEqual(unknown.returncode, 1)
        self.assertIn("no job of run 'no-such-run'", unknown.stderr)
        neither = run("export", "--db", db, "-o", other, check=False)
        self.assertNotEqual(neither.returncode, 0)
        self.assertIn("--job or --run-id", neither.stderr)
        empty = run("export", "--db", db, "--job", "1", "--since", "2000-01-01", "--until", "2000-01-02", "-o", other,
                    check=False)
        self.assertEqual(empty.returncode, 1)
        self.assertIn("no samples in the range", empty.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp)), sorted(["h100-disk.db", "h100-disk.db-shm", "h100-disk.db-wal",
                                                               "out.db"]))

    # The shipped Slurm epilog, run as slurmd would after a job (its id matched as a run id).
    def test_slurm_epilog_leaves_this_nodes_slice(self):
        db = self.copy("h200x2-ddp-rank-disk.db")
        job = swjson.loads(run("jobs", "--json", "--db", db).stdout)[0]
        exports = os.path.join(self.tmp, "exports")
        epilog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "slurm", "epilog.sh")
        work = os.path.join(self.tmp, "work")
        os.mkdir(work)
        env = dict(os.environ, SLURM_JOB_ID=job["key"].split(":", 1)[1], STALLWATCH_EXPORT_DIR=exports,
                   STALLWATCH_DB=db, STALLWATCH_BIN=os.path.abspath(BIN), SLURM_JOB_WORK_DIR=work,
                   SLURM_JOB_USER="root")
        done = subprocess.run(["sh", epilog], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        folder = os.path.join(exports, env["SLURM_JOB_ID"])
        slices = os.listdir(folder)
        self.assertEqual(len(slices), 1, slices)
        self.assertEqual(run("report", "--json", "--db", os.path.join(folder, slices[0])).stdout,
                         run("report", "--json", "--db", db).stdout)
        # The owner's summary in the job's directory: the report of this node's slice.
        summaries = [f for f in os.listdir(work) if f.startswith(f"stallwatch-{env['SLURM_JOB_ID']}-")]
        self.assertEqual(len(summaries), 1, os.listdir(work))
        with open(os.path.join(work, summaries[0])) as f:
            summary = f.read()
        self.assertEqual(summary, run("report", "--db", os.path.join(folder, slices[0])).stdout)
        self.assertIn("disk-slow", summary)
        self.assertIn("goodput", summary)
        # A job this node did not record: nothing written, and still exit 0 (never fail the node).
        env["SLURM_JOB_ID"] = "4242"
        done = subprocess.run(["sh", epilog], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0)
        self.assertFalse(any(f.endswith(".db") for f in os.listdir(os.path.join(exports, "4242"))))


if __name__ == "__main__":
    unittest.main()
