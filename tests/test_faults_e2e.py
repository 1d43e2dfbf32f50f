"""Fault tests of the recording agent, with the real binary and real SQLite files: a corrupt
or truncated DB at start, SIGKILL while writing, a writer that blocks (the DB's disk
stalling, here an exclusive lock held by another process), and a full filesystem."""

import contextlib
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import unittest
import urllib.request

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class FaultsE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-faults-")
        self.db = os.path.join(self.tmp, "sw.db")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        small = os.path.join(self.tmp, "small")
        if os.path.ismount(small) and subprocess.run(["umount", small], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", small], capture_output=True)  # still busy: detach it
        shutil.rmtree(self.tmp, ignore_errors=True)

    def record(self, *args, duration="2s"):
        return subprocess.run([BIN, "record", "--db", self.db, "--duration", duration, "--no-collector.gpu",
                               "--health-interval", "0s", "--socket", os.path.join(self.tmp, "dl.sock"), *args],
                              capture_output=True, text=True, timeout=60)

    def start(self, *args, db=None):
        p = subprocess.Popen([BIN, "record", "--db", db or self.db, "--no-collector.gpu", "--health-interval", "0s",
                              "--socket", os.path.join(self.tmp, "dl.sock"), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def intervals(self, db=None):
        c = sqlite3.connect(db or self.db)
        try:
            return c.execute("SELECT count(DISTINCT ts_ms) FROM disk_samples").fetchone()[0]
        finally:
            c.close()

    def test_corrupt_db_is_moved_aside(self):
        # A database whose header was overwritten (its pages behind it): damaged, moved aside.
        r = self.record(duration="3s")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.db, "r+b") as f:
            f.write(b"SQLite format 3\x00" + b"\xff" * 84)
        r = self.record()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("was corrupt and was moved aside", r.stderr)
        aside = [f for f in os.listdir(self.tmp) if f.startswith("sw.db.corrupt-") and not f.endswith(("-wal", "-shm"))]
        self.assertEqual(len(aside), 1, os.listdir(self.tmp))
        self.assertGreater(self.intervals(), 0)
        c = sqlite3.connect(self.db)
        self.assertEqual(c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        self.assertEqual(c.execute("SELECT count(*) FROM agent_events WHERE message LIKE '%corrupt%'").fetchone()[0], 1)

    def test_a_file_that_is_no_database_is_left_alone(self):
        # Issue 46: `record --db stallwatch.conf`, a careless path to the operator's own file.
        with open(self.db, "wb") as f:
            f.write(b"this is not a database, it is a mistake" * 200)
        r = self.record()
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is not a SQLite database", r.stderr)
        self.assertEqual(sorted(f for f in os.listdir(self.tmp) if f.startswith("sw.db") and not f.endswith(".lock")), ["sw.db"])
        with open(self.db, "rb") as f:
            self.assertTrue(f.read().startswith(b"this is not a database"))  # untouched

    def test_second_recorder_on_the_same_db_is_refused(self):
        first = self.start()
        deadline = time.monotonic() + 10
        while not os.path.exists(self.db + ".lock") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)
        r = self.record()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"is being written by another stallwatch record, pid {first.pid}", r.stderr)
        self.assertIsNone(first.poll(), "the first recorder goes on")
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=10)
        # Its samples are all its own: one run, and the next recorder takes the DB over.
        c = sqlite3.connect(self.db)
        self.assertEqual(c.execute("SELECT count(*) FROM runs").fetchone()[0], 1)
        c.close()
        r = self.record()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_db_corrupt_in_the_middle_is_moved_aside(self):
        r = self.record(duration="3s")
        self.assertEqual(r.returncode, 0, r.stderr)
        size = os.path.getsize(self.db)
        self.assertGreater(size, 4 * 4096)
        with open(self.db, "r+b") as f:  # the header stays intact: only a page inside is garbage
            f.seek(3 * 4096)
            f.write(b"\xde\xad\xbe\xef" * 1024)
        r = self.record()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("was corrupt and was moved aside", r.stderr)
        self.assertEqual(len([f for f in os.listdir(self.tmp) if f.startswith("sw.db.corrupt-")]), 1)
        c = sqlite3.connect(self.db)
        self.assertEqual(c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        c.close()

    def test_readers_refuse_newer_and_foreign_databases(self):
        r = self.record()
        self.assertEqual(r.returncode, 0, r.stderr)
        c = sqlite3.connect(self.db)
        c.execute("PRAGMA user_version = 999")
        c.commit()
        c.close()
        readers = [["report", "--db", self.db], ["jobs", "--db", self.db], ["incidents", "--db", self.db],
                   ["incidents", "--recompute", "--db", self.db], ["health", "--db", self.db],
                   ["replay", "--db", self.db]]
        for args in readers:
            r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, f"{args}: {r.stdout} {r.stderr}")
            self.assertIn("schema version 999, newer than this stallwatch", r.stderr, args)
        # Someone else's SQLite file: refused, and left exactly as it was.
        other = os.path.join(self.tmp, "other.sqlite")
        c = sqlite3.connect(other)
        c.execute("CREATE TABLE notes (body TEXT)")
        c.commit()
        c.close()
        with open(other, "rb") as f:
            before = f.read()
        for args in readers:
            args = [other if a == self.db else a for a in args]
            r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, f"{args}: {r.stdout} {r.stderr}")
            self.assertIn("is not a stallwatch database", r.stderr, args)
        with open(other, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_stop_ends_promptly_on_a_frozen_filesystem(self):
        """SIGTERM while the DB's filesystem is frozen (fsfreeze): the agent says within
        --stop-timeout what it could not write and exits 1, instead of waiting for the thaw."""
        image, mnt = os.path.join(self.tmp, "fs.img"), os.path.join(self.tmp, "frozen")
        os.mkdir(mnt)
        subprocess.run(["truncate", "-s", "64M", image], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
        subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
        self.addCleanup(subprocess.run, ["umount", mnt], capture_output=True)
        self.addCleanup(subprocess.run, ["fsfreeze", "-u", mnt], capture_output=True)
        db = os.path.join(mnt, "sw.db")
        p = self.start("--interval", "200ms", "--flush-interval", "1s", "--stop-timeout", "2s", db=db)
        time.sleep(3)
        subprocess.run(["fsfreeze", "-f", mnt], check=True)
        time.sleep(2)  # a flush is now blocked in the kernel, and more intervals queue up
        stopped = time.monotonic()
        p.send_signal(signal.SIGTERM)
        said = ""
        for line in p.stderr:  # read as it comes: the process itself ends only after the thaw
            said += line
            if "queued intervals were not written" in line:
                break
        self.assertLess(time.monotonic() - stopped, 8, said)
        self.assertRegex(said, r"did not answer within --stop-timeout: \d+ queued intervals were not written")
        subprocess.run(["fsfreeze", "-u", mnt], check=True)
        self.assertEqual(p.wait(timeout=30), 1)

    def test_truncated_db_is_moved_aside(self):
        r = self.record(duration="3s")
        self.assertEqual(r.returncode, 0, r.stderr)
        size = os.path.getsize(self.db)
        with open(self.db, "r+b") as f:
            f.truncate(size // 2)
        r = self.record()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("is truncated", r.stderr)
        self.assertGreater(self.intervals(), 0)

    def test_sigkill_loses_at_most_one_flush_interval(self):
        p = self.start("--interval", "500ms", "--flush-interval", "1s")
        time.sleep(1.0)  # startup, priming
        t0 = time.monotonic()
        time.sleep(5)
        p.send_signal(signal.SIGKILL)
        p.wait()
        elapsed = time.monotonic() - t0
        c = sqlite3.connect(self.db)
        self.assertEqual(c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        c.close()
        # Sampled every 0.5 s for ~6 s; the last flush interval (1 s: 2 intervals) may be lost.
        got = self.intervals()
        self.assertGreaterEqual(got, int(elapsed / 0.5) - 2 - 1, f"{got} intervals in {elapsed:.1f} s")
        # The next agent opens it cleanly and goes on.
        r = self.record()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(self.intervals(), got)

    def test_blocked_writer_drops_oldest_while_sampling_goes_on(self):
        port = free_port()
        self.record(duration="1s")  # create the DB
        p = self.start("--interval", "200ms", "--flush-interval", "0s", "--queue-capacity", "10",
                       "--listen", f"127.0.0.1:{port}")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if metric(port, "stallwatch_intervals_total"):
                    break
            except OSError:
                pass
            time.sleep(0.2)
        # Another process holds the write lock for 8 s: every write waits (busy timeout) and fails.
        blocker = sqlite3.connect(self.db, timeout=0, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        before = metric(port, "stallwatch_intervals_total")
        time.sleep(8)
        during = metric(port, "stallwatch_intervals_total")
        dropped = metric(port, "stallwatch_writer_dropped_batches_total")
        depth = metric(port, "stallwatch_writer_queue_depth")
        blocker.execute("ROLLBACK")
        blocker.close()
        # Sampling kept its pace (5 per second) while nothing could be written.
        self.assertGreaterEqual(during - before, 35, (before, during))
        self.assertGreater(dropped, 0)
        self.assertLessEqual(depth, 10)
        time.sleep(3)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        c = sqlite3.connect(self.db)
        gap = c.execute("SELECT message FROM agent_events WHERE source = 'writer' AND message LIKE "
                        "'database writes failed%'").fetchall()
        self.assertEqual(len(gap), 1, err)
        self.assertRegex(gap[0][0], r"\d+ intervals dropped meanwhile")
        dropped_run = c.execute("SELECT dropped_batches FROM runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
        self.assertGreater(dropped_run, 0)

    def test_stopped_agent_skips_missed_ticks(self):
        """A cycle that overruns (here: the whole agent stopped for 2 s) skips the ticks it
        missed and counts them, instead of firing them back to back."""
        p = self.start("--interval", "200ms", "--duration", "5s", "--flush-interval", "0s")
        time.sleep(1.5)
        p.send_signal(signal.SIGSTOP)
        time.sleep(2)
        p.send_signal(signal.SIGCONT)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        m = re.search(r"recorded (\d+) intervals .* (\d+) late ticks", err)
        self.assertTrue(m, err)
        self.assertGreaterEqual(int(m.group(2)), 8, err)
        c = sqlite3.connect(self.db)
        ts = [r[0] for r in c.execute("SELECT DISTINCT ts_ms FROM disk_samples ORDER BY ts_ms")]
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        self.assertGreaterEqual(max(gaps), 1800)  # the stop shows as one long interval
        # No burst of catch-up ticks after it: at most one short interval, where the next tick
        # falls back on the interval grid.
        self.assertLessEqual(sum(1 for g in gaps if g < 150), 1, gaps)

    def test_device_added_and_removed_during_recording(self):
        if os.geteuid() != 0 or not shutil.which("losetup"):
            self.fail("needs root and losetup (CI runs as root)")
        image = os.path.join(self.tmp, "disk.img")
        subprocess.run(["truncate", "-s", "16M", image], check=True)
        p = self.start("--interval", "200ms", "--flush-interval", "0s")
        time.sleep(1)
        made = subprocess.run(["losetup", "-f", "--show", image], capture_output=True, text=True)
        self.assertEqual(made.returncode, 0, made.stderr)
        loop = made.stdout.strip()
        subprocess.run(["dd", f"if={loop}", "of=/dev/null", "bs=1M", "count=4", "iflag=direct"], capture_output=True)
        time.sleep(1.5)
        subprocess.run(["losetup", "-d", loop], check=True)
        removed_ms = time.time() * 1000
        time.sleep(1.5)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertNotIn("[error]", err)
        name = os.path.basename(loop)
        c = sqlite3.connect(self.db)
        seen = c.execute("SELECT count(*), max(ts_ms) FROM disk_latency WHERE device = ?", (name,)).fetchone()
        self.assertGreater(seen[0], 0, "the added device was sampled")
        after = c.execute("SELECT count(DISTINCT ts_ms) FROM disk_samples WHERE ts_ms > ?", (removed_ms + 400,)).fetchone()[0]
        self.assertGreaterEqual(after, 4, "sampling went on after the removal")

    def test_full_filesystem(self):
        if os.geteuid() != 0:
            self.fail("needs root to mount a small tmpfs (CI runs as root)")
        small = os.path.join(self.tmp, "small")
        os.mkdir(small)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", small], check=True)
        db = os.path.join(small, "sw.db")
        port = free_port()
        p = self.start("--interval", "200ms", "--flush-interval", "0s", "--listen", f"127.0.0.1:{port}", db=db)
        time.sleep(2)
        filler = os.path.join(small, "filler")
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k", "count=100"], capture_output=True)
        time.sleep(6)
        failed = metric(port, "stallwatch_writer_failed_writes_total")
        intervals = metric(port, "stallwatch_intervals_total")
        os.remove(filler)  # space returns
        time.sleep(3)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertGreater(failed, 0, err)
        self.assertGreaterEqual(intervals, 35)
        # Closed before tearDown unmounts the tmpfs: an open file keeps it busy (and mounted).
        with contextlib.closing(sqlite3.connect(db)) as c:
            self.assertEqual(c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            gap = c.execute("SELECT message FROM agent_events WHERE message LIKE 'database writes failed%'").fetchall()
        self.assertEqual(len(gap), 1, err)
        self.assertIn("full", gap[0][0])


if __name__ == "__main__":
    unittest.main()
