"""Hostile and careless inputs (issue 36, docs/RELIABILITY.md "Hostile and careless input"): bytes
that are not UTF-8 and control characters in job ids and mount points, 100 KB ids, another
user's process naming root's job, symlinks and FIFOs where files are expected, read-only and
damaged recordings, flags that cannot work. The real binary, real processes, real mounts."""

import json
import swjson
import os
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "python")
RECORDING = os.path.join(HERE, "fixtures", "recordings", "h200-stall-disk.db")

# A loop that reports 30 steps through the dataloader hook, one every 50 ms.
SENDER = """
import time, stallwatch
for batch in stallwatch.watch(iter([[0] * 4] * 30)):
    time.sleep(0.05)
time.sleep(float(__import__('os').environ.get('LINGER', '0')))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


class HostileE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-hostile-")
        os.chmod(self.tmp, 0o755)
        self.db = os.path.join(self.tmp, "sw.db")
        self.sock = os.path.join(self.tmp, "run", "dl.sock")
        self.procs = []
        self.mounts = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_bin(self, *args, timeout=30, **kw):
        return subprocess.run([BIN, *args], capture_output=True, timeout=timeout, **kw)

    def start_agent(self, *extra, db=None):
        os.makedirs(os.path.dirname(self.sock), mode=0o755, exist_ok=True)
        agent = subprocess.Popen(
            [BIN, "record", "--db", db or self.db, "--socket", self.sock, "--interval", "200ms",
             "--no-collector.gpu", "--health-interval", "0s", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(agent)
        for _ in range(200):
            if os.path.exists(self.sock):
                return agent
            if agent.poll() is not None:
                break
            time.sleep(0.02)
        self.fail("the agent did not start: " + agent.communicate()[1].decode(errors="replace"))

    def sender(self, env_bytes, user=None, linger=0):
        env = dict(os.environb)
        env.update({b"STALLWATCH_SOCKET": self.sock.encode(), b"PYTHONPATH": PACKAGE.encode(),
                    b"LINGER": str(linger).encode()})
        env.update(env_bytes)
        cmd = [sys.executable, "-c", SENDER]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def prometheus(self, port):
        """Debian's Prometheus scraping the agent on PORT every second; returns query(expr)."""
        if not shutil.which("prometheus"):
            self.fail("Debian's prometheus is not installed (scripts/install-deps.sh installs it)")
        prom_port = free_port()
        config = os.path.join(self.tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: stallwatch\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        prom = subprocess.Popen(["prometheus", f"--config.file={config}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}",
                                 f"--storage.tsdb.path={self.tmp}/tsdb"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(prom)

        def query(expr):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            try:
                out = json.loads(get(url))
            except urllib.error.HTTPError as e:
                self.fail(f"{expr}: {e.read()[:500]}")
            self.assertEqual(out["status"], "success", out)
            return out["data"]["result"]
        return query

    def mount_loop(self, name_bytes):
        """A 4 MiB ext4 image on a loop device, mounted at NAME_BYTES under the test's folder."""
        image = os.path.join(self.tmp, "fs.img")
        with open(image, "wb") as f:
            f.truncate(4 << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True, capture_output=True)
        point = os.path.join(self.tmp.encode(), name_bytes)
        os.mkdir(point)
        subprocess.run([b"mount", b"-o", b"loop", image.encode(), point], check=True)
        self.mounts.append(point)
        return point

    # --- Security: bytes from outside -----------------------------------------------------------

    def test_invalid_utf8_and_huge_ids_keep_the_metrics_page_valid(self):
        """A job id with a byte that is not UTF-8 and an ESC sequence, and twenty 131 KB ids: the
        page stays valid UTF-8 that promtool accepts, and small; the DB and JSON hold valid text."""
        port = free_port()
        agent = self.start_agent("--listen", f"127.0.0.1:{port}")
        bad = self.sender({b"SLURM_JOB_ID": b"bad\xff\x1b[31m\n"}, linger=20)
        huge = [self.sender({b"SLURM_JOB_ID": b"%d" % i + b"x" * 130_000}, linger=20)
                for i in range(20)]
        page, deadline = b"", time.monotonic() + 20
        while time.monotonic() < deadline and page.count(b"stallwatch_job_uninterruptible_threads{") < 21:
            time.sleep(0.3)
            page = get(f"http://127.0.0.1:{port}/metrics")
        self.assertEqual(page.count(b"stallwatch_job_uninterruptible_threads{"), 21, page[-3000:])
        page.decode("utf-8")  # raises on a byte that is not UTF-8
        self.assertLess(len(page), 1 << 20, "ids are bounded: the page stays small")
        check = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True)
        self.assertNotIn(b"error", check.stderr.lower() + check.stdout.lower(), check)
        self.assertIn(b"stallwatch_outside_texts_changed_total", page)
        # A real Prometheus scraping the agent meanwhile: the target stays up, every job's
        # series is ingested.
        query = self.prometheus(port)
        up, jobs, deadline = [], [], time.monotonic() + 15
        while time.monotonic() < deadline and not (up and jobs):
            time.sleep(0.5)
            try:
                up = query('up{job="stallwatch"} == 1')
                jobs = query("count(stallwatch_job_uninterruptible_threads) == 21")
            except OSError:
                pass
        self.assertTrue(up, "Prometheus marked the agent's target down")
        self.assertTrue(jobs, "Prometheus did not ingest every job's series")
        self.assertTrue(query('stallwatch_job_uninterruptible_threads{training_job=~"(?s)slurm:bad.+"}'))
        for p in [bad, *huge]:
            p.wait(timeout=30)
        agent.terminate()
        agent.communicate(timeout=15)
        for args in (["jobs", "--json"], ["report", "--json"], ["incidents", "--json"]):
            r = self.run_bin(*args, "--db", self.db)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            swjson.loads(r.stdout.decode("utf-8"))
        text = self.run_bin("jobs", "--db", self.db)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertNotIn(b"\x1b", text.stdout)
        self.assertIn(b"slurm:bad\xef\xbf\xbd\\x1b[31m\\n", text.stdout)

    def test_readers_survive_a_recording_with_invalid_utf8(self):
        """A recording whose job key and label are not valid UTF-8 (an older agent wrote them):
        every --json output still comes, with the bytes replaced, not exit 1 for all jobs."""
        db = os.path.join(self.tmp, "old.db")
        shutil.copy(RECORDING, db)
        with sqlite3.connect(db) as c:
            c.execute("UPDATE jobs SET job_key = CAST(X'626164ff1b5b33316d' AS TEXT), "
                      "label = CAST(X'6c6162656cfe' AS TEXT)")
        for args in (["jobs", "--json"], ["report", "--json"], ["incidents", "--json", "--recompute"]):
            r = self.run_bin(*args, "--db", db)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertIn("\ufffd", r.stdout.decode("utf-8"), args)
        html = os.path.join(self.tmp, "r.html")
        r = self.run_bin("report", "--db", db, "--html", html)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(html, "rb") as f:
            f.read().decode("utf-8")
        text = self.run_bin("report", "--db", db)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertNotIn(b"\x1b", text.stdout)

    def test_a_report_without_evidence_says_so_not_100_percent(self):
        """Issue 46: a recording of one interval, or a hooked job whose steps are 0 throughout,
        got "goodput 100.00 %". Nothing judged them: the goodput is unknown, and why is said."""
        for case in ("one_interval", "zero_steps"):
            db = os.path.join(self.tmp, case + ".db")
            self.copy_recording(db)
            with sqlite3.connect(db) as c:
                if case == "one_interval":
                    c.execute("DELETE FROM job_samples WHERE ts_ms > (SELECT min(ts_ms) FROM job_samples)")
                else:
                    c.execute("UPDATE job_samples SET steps = 0")
            [report] = swjson.loads(self.run_bin("report", "--db", db, "--json").stdout)
            self.assertIsNone(report["goodput"], case)
            self.assertTrue(report["goodput_unknown_because"], case)
            text = self.run_bin("report", "--db", db).stdout.decode()
            self.assertIn("goodput     unknown: ", text, case)
            self.assertNotIn("100.00 %", text, case)

    def test_a_range_inside_a_recorded_stall_reports_the_stall(self):
        """Issue 46: report --since/--until over 14 s inside a recorded stall said "goodput
        100.00 %, incidents 0" while `incidents` listed it. The range is judged with the hour
        before it, as the whole run is: the stall is there, clipped to the range."""
        with open(RECORDING[:-3] + ".window") as f:
            t_in = int(f.read().split()[0]) // 1000
        db = os.path.join(self.tmp, "stall.db")
        self.copy_recording(db)
        [inside] = swjson.loads(self.run_bin("report", "--db", db, "--json", "--since", str(t_in + 3),
                                           "--until", str(t_in + 17)).stdout)
        [whole] = swjson.loads(self.run_bin("report", "--db", db, "--json").stdout)
        self.assertEqual(len(inside["incidents"]), 1, inside["incidents"])
        self.assertEqual(inside["incidents"][0]["class"], whole["incidents"][0]["class"])
        self.assertGreaterEqual(inside["incidents"][0]["start_ms"], (t_in + 2) * 1000)
        self.assertLess(inside["goodput"], 0.5)
        self.assertLessEqual(inside["incidents"][0]["gpu_seconds_lost"], whole["incidents"][0]["gpu_seconds_lost"])

    def test_readings_past_any_collector_are_no_readings(self):
        """Issue 46: a recording with waits of 1e308 s and steps of INT64_MAX printed "waited for
        input -nan %". Such a value is no reading: the report is made from the rest."""
        db = os.path.join(self.tmp, "edited.db")
        self.copy_recording(db)
        with sqlite3.connect(db) as c:
            c.execute("UPDATE job_samples SET data_wait_seconds = 1e308 WHERE rowid % 3 = 0")
            c.execute("UPDATE job_samples SET steps = 9223372036854775807 WHERE rowid % 7 = 0")
        text = self.run_bin("report", "--db", db)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertNotIn(b"nan", text.stdout.lower())
        self.assertNotIn(b"inf ", text.stdout.lower())
        r = self.run_bin("report", "--db", db, "--json")
        json.loads(r.stdout, parse_constant=lambda c: self.fail(f"{c} in the JSON"))
        [report] = swjson.loads(r.stdout)
        self.assertGreaterEqual(report["limiter"]["input_wait_share"], 0)
        self.assertLessEqual(report["limiter"]["input_wait_share"], 1)

    def test_mount_points_with_bad_bytes_and_newlines(self):
        """A mount point with a byte that is not UTF-8, a newline and an ESC: devices --json is
        valid, the text listing keeps one row per mount and prints no control character."""
        self.mount_loop(b"m\xff\nnext\x1b[2J")
        r = self.run_bin("devices", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        listing = swjson.loads(r.stdout.decode("utf-8"))
        points = [m["mount_point"] for d in listing["block_devices"] for m in d["mounts"]]
        self.assertTrue(any(p.endswith("/m\ufffd\nnext\x1b[2J") for p in points), points)
        text = self.run_bin("devices")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertNotIn(b"\x1b", text.stdout)
        self.assertIn(b"m\xef\xbf\xbd\\nnext\\x1b[2J", text.stdout)
        self.assertFalse(any(line.startswith(b"next") for line in text.stdout.splitlines()))

    def steps_of_two_claims(self, job_id, first_user):
        """Root's sender and one of uid 1001 naming the same SLURM_JOB_ID, FIRST_USER's found
        first (None: root's): the steps each job key holds once the agent has stopped."""
        agent = self.start_agent("--socket-mode", "0666")
        os.chmod(os.path.dirname(self.sock), 0o755)
        second_user = 1001 if first_user is None else None
        first = self.sender({b"SLURM_JOB_ID": job_id}, user=first_user, linger=1)
        time.sleep(0.6)
        second = self.sender({b"SLURM_JOB_ID": job_id}, user=second_user, linger=1)
        for p in (first, second):
            _, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 0, err)
        time.sleep(0.6)
        agent.terminate()
        agent.communicate(timeout=15)
        with sqlite3.connect(self.db) as c:
            return dict(c.execute("SELECT j.job_key, total(s.steps) FROM jobs j "
                                  "LEFT JOIN job_samples s USING (job_id) GROUP BY j.job_id"))

    def copy_recording(self, db):
        """RECORDING copied to DB with its -wal (what it holds past the file)."""
        for suffix in ("", "-wal"):
            if os.path.exists(RECORDING + suffix):
                shutil.copy(RECORDING + suffix, db + suffix)

    def test_another_users_process_does_not_join_roots_job(self):
        """Root's job and a process of uid 1001 naming the same SLURM_JOB_ID: two jobs, and root's
        steps are its own 30."""
        if os.geteuid() != 0:
            self.skipTest("needs root to run a process as another user")
        jobs = self.steps_of_two_claims(b"4242", first_user=None)  # root's job is found first
        self.assertEqual(jobs.get("slurm:4242"), 30, jobs)
        self.assertEqual(jobs.get("slurm:4242~uid1001"), 30, jobs)

    def test_a_user_arriving_first_does_not_take_roots_job_id(self):
        """Issue 46: uid 1001 starts a process naming SLURM_JOB_ID 4243 before root's job does.
        The user's unconfirmed claim carries its uid; root's job keeps the plain key and its own
        30 steps (before, the user took slurm:4243 and root's job became slurm:4243~uid0)."""
        if os.geteuid() != 0:
            self.skipTest("needs root to run a process as another user")
        jobs = self.steps_of_two_claims(b"4243", first_user=1001)  # the user's is found first
        self.assertEqual(jobs.get("slurm:4243"), 30, jobs)
        self.assertEqual(jobs.get("slurm:4243~uid1001"), 30, jobs)
        self.assertNotIn("slurm:4243~uid0", jobs)

    def test_a_flood_of_job_ids_leaves_room_for_a_real_job_and_nothing_behind(self):
        """Issue 46: 270 processes of uid 1001, each naming its own SLURM_JOB_ID, filled the
        256-job cap, and root's job started meanwhile went untracked with nothing said on
        /metrics; ended jobs' limiter series stayed on /metrics for good. Now the ordinary
        user's senders get 224 slots, root's job is tracked at once, the refusals are counted,
        and once the flood ends its series go."""
        if os.geteuid() != 0 or not shutil.which("cc"):
            self.skipTest("needs root (another user's processes) and a C compiler")
        sender = os.path.join(self.tmp, "flood_sender")
        subprocess.run(["cc", "-O2", "-o", sender, os.path.join(HERE, "flood_sender.c")], check=True)
        os.chmod(self.tmp, 0o755)
        port = free_port()
        agent = self.start_agent("--socket-mode", "0666", "--listen", f"127.0.0.1:{port}")
        os.chmod(os.path.dirname(self.sock), 0o755)
        flood = []
        for i in range(270):
            env = {"SLURM_JOB_ID": f"flood{i}", "PATH": "/usr/bin:/bin"}
            flood.append(subprocess.Popen(["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups", sender,
                                           self.sock, "12000"], env=env))
        self.procs.extend(flood)
        time.sleep(4)  # the flood found, the cap full
        real = subprocess.Popen([sender, self.sock, "3000"], env={"SLURM_JOB_ID": "realjob"})
        self.procs.append(real)

        def metrics():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                return r.read().decode()

        seen = None
        for _ in range(30):
            time.sleep(0.2)
            if 'training_job="slurm:realjob"' in metrics():
                seen = True
                break
        self.assertTrue(seen, "root's job not on /metrics within 6 s of its start")
        page = metrics()
        refused = re.search(r'stallwatch_collector_refused_total\{collector="jobs"\} (\S+)', page)
        self.assertIsNotNone(refused)
        self.assertGreater(float(refused.group(1)), 0)
        tracked = len(set(re.findall(r'training_job="(slurm:flood\d+~uid1001)"', page)))
        self.assertLessEqual(tracked, 224)
        for p in flood + [real]:
            p.wait(timeout=60)
        time.sleep(3)
        self.assertNotIn("flood", metrics())  # the ended jobs' series are gone
        agent.terminate()
        agent.communicate(timeout=15)

    # --- Security: files ------------------------------------------------------------------------

    def test_record_refuses_a_symlink_or_fifo_as_its_database(self):
        target = os.path.join(self.tmp, "elsewhere")
        for case in ("dangling", "to_empty", "fifo"):
            path = os.path.join(self.tmp, case + ".db")
            if case == "dangling":
                os.symlink(target, path)
            elif case == "to_empty":
                open(target, "w").close()
                os.symlink(target, path)
            else:
                os.mkfifo(path)
            r = self.run_bin("record", "--db", path, "--duration", "1s", "--no-collector.gpu",
                             "--socket", os.path.join(self.tmp, case + ".sock"), timeout=20)
            self.assertEqual(r.returncode, 1, (case, r.stderr))
            self.assertIn(b"is a symbolic link" if case != "fifo" else b"is not a regular file", r.stderr)
            if case == "dangling":
                self.assertFalse(os.path.exists(target), "the link's target was created")
            if case == "to_empty":
                self.assertEqual(os.path.getsize(target), 0, "a database was written through the link")
                os.unlink(target)
        # A database made by the agent is owner-only.
        r = self.run_bin("record", "--db", self.db, "--duration", "1s", "--no-collector.gpu",
                         "--socket", os.path.join(self.tmp, "ok.sock"), timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(self.db).st_mode), 0o600)

    def test_readers_refuse_a_fifo_and_read_a_read_only_recording(self):
        fifo = os.path.join(self.tmp, "fifo.db")
        os.mkfifo(fifo)
        for args in (["report"], ["jobs"], ["incidents"], ["export", "--output", os.path.join(self.tmp, "x.db"), "--job", "1"],
                     ["top", "--once"]):
            r = self.run_bin(*args, "--db", fifo, timeout=10)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(b"not a regular file", r.stderr, args)
        # A recording on a read-only mount (a bind mount remounted ro).
        src = os.path.join(self.tmp, "src")
        os.mkdir(src)
        shutil.copy(RECORDING, src)
        ro = os.path.join(self.tmp, "ro")
        os.mkdir(ro)
        subprocess.run(["mount", "--bind", src, ro], check=True)
        self.mounts.append(ro)
        subprocess.run(["mount", "-o", "remount,bind,ro", ro], check=True)
        db = os.path.join(ro, os.path.basename(RECORDING))
        for args in (["report"], ["jobs"], ["incidents"], ["top", "--once"],
                     ["export", "--output", os.path.join(self.tmp, "slice.db"), "--job", "1"]):
            r = self.run_bin(*args, "--db", db)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
        self.assertEqual(sorted(os.listdir(ro)), [os.path.basename(RECORDING)], "nothing written beside it")

    def test_a_readable_recording_in_a_folder_the_reader_cannot_write(self):
        """Issue 46: a 0644 recording in a folder an ordinary user cannot write was "not a
        readable SQLite database: attempt to write a readonly database". Without a -wal beside
        it, it is read (everything is in the file); with one the user cannot use, it is said why."""
        if os.geteuid() != 0:
            self.skipTest("needs root to read as another user")
        folder = os.path.join(self.tmp, "theirs")
        os.mkdir(folder)
        db = os.path.join(folder, "run.db")
        shutil.copy(RECORDING, db)
        with sqlite3.connect(db) as c:  # everything into the file, the -wal gone
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for extra in ("-wal", "-shm"):
            if os.path.exists(db + extra):
                os.remove(db + extra)
        os.chmod(db, 0o644)
        os.chmod(folder, 0o755)
        os.chmod(self.tmp, 0o755)
        as_nobody = dict(user=65534, group=65534)
        r = self.run_bin("report", "--db", db, "--json", **as_nobody)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(swjson.loads(r.stdout)), 1)
        self.assertEqual(sorted(os.listdir(folder)), ["run.db"], "nothing written beside it")
        with open(db + "-wal", "wb"):
            pass
        os.chmod(db + "-wal", 0o600)  # a -wal the reader cannot read
        r = self.run_bin("report", "--db", db, **as_nobody)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"cannot be read by this user", r.stderr)

    # --- Flags, files and units checked at start -------------------------------------------------

    def test_flags_that_name_something_are_checked_at_start(self):
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        plain = os.path.join(self.tmp, "plain.sh")
        with open(plain, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(plain, 0o644)
        v1 = os.path.join(self.tmp, "v1")
        os.mkdir(v1)
        v1_mounted = subprocess.run(["mount", "-t", "cgroup", "-o", "none,name=swtest", "swtest", v1],
                                    capture_output=True).returncode == 0
        if v1_mounted:
            self.mounts.append(v1)
        cases = [
            (["--on-incident", "/nonexistent/hook"], b"--on-incident /nonexistent/hook: No such file"),
            (["--on-incident", plain], b"not executable"),
            (["--pid", "999999"], b"--pid 999999: no such process"),
            (["--cgroup", "/etc"], b"not a cgroup v2 directory"),
            (["--retain", "14"], b"--retain '14' needs a unit"),
            (["--retain", "1"], b"needs a unit"),
            (["--queue-capacity", "0"], b"at least 1 interval"),
            (["--webhook-file", fifo], b"not a regular file"),
            (["--config", fifo], b"--config " + fifo.encode() + b": not a regular file"),
        ]
        if v1_mounted:
            cases.append((["--cgroup", v1], b"a cgroup v1 hierarchy"))
        for extra, said in cases:
            t0 = time.monotonic()
            r = self.run_bin("record", "--db", self.db, "--duration", "1s", "--no-collector.gpu",
                             "--socket", os.path.join(self.tmp, "c.sock"), *extra, timeout=20)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))  # a usage error, ours or the parser's
            self.assertIn(said, r.stderr, extra)
            self.assertNotIn(b"1.797", r.stderr)
            self.assertLess(time.monotonic() - t0, 5, extra)
        self.assertFalse(os.path.exists(self.db), "nothing was recorded by a refused start")
        ok = self.run_bin("record", "--db", self.db, "--duration", "1s", "--no-collector.gpu",
                          "--retain", "14d", "--socket", os.path.join(self.tmp, "c.sock"), timeout=20)
        self.assertEqual(ok.returncode, 0, ok.stderr)

    def test_reader_ranges_and_jobs_that_cannot_match_are_errors(self):
        db = RECORDING
        for args, said in ((["report", "--since", "1h", "--until", "2h"], b"is after --until"),
                           (["report", "--since", "2026-02-30"], b"is not a time"),
                           (["export", "--job", "1", "--output", os.path.join(self.tmp, "e.db"),
                             "--since", "2026-11-02T00:00Z", "--until", "2026-11-01"], b"is after --until"),
                           (["report", "--job", "99"], b"no job 99"),
                           (["incidents", "--job", "99"], b"no job 99")):
            r = self.run_bin(*args, "--db", db)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(said, r.stderr, args)

    def test_html_is_never_written_through_a_link_or_over_a_file(self):
        target = os.path.join(self.tmp, "precious")
        with open(target, "w") as f:
            f.write("keep me")
        link = os.path.join(self.tmp, "page.html")
        os.symlink(target, link)
        r = self.run_bin("report", "--db", RECORDING, "--html", link)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"it exists (--force replaces it)", r.stderr)
        r = self.run_bin("report", "--db", RECORDING, "--html", link, "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(target) as f:
            self.assertEqual(f.read(), "keep me", "the link's target was overwritten")
        self.assertFalse(os.path.islink(link), "the link itself is replaced")
        self.assertEqual(stat.S_IMODE(os.stat(link).st_mode), 0o640)
        fresh = os.path.join(self.tmp, "fresh.html")
        r = self.run_bin("report", "--db", RECORDING, "--html", fresh)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(fresh).st_mode), 0o640)

    def test_a_link_loop_among_recordings_is_said_and_the_rest_reported(self):
        folder = os.path.join(self.tmp, "nodes")
        os.mkdir(folder)
        shutil.copy(RECORDING, os.path.join(folder, "node-a.db"))
        os.symlink("loop.db", os.path.join(folder, "loop.db"))
        r = self.run_bin("report", "--db", folder)
        self.assertEqual(r.returncode, 0, r.stderr)
        said = r.stdout + r.stderr
        self.assertIn(b"loop.db: Too many levels of symbolic links", said)
        self.assertNotIn(b"node-a.db:", said, "the readable recording was read")

    def test_a_database_missing_a_table_is_moved_aside(self):
        r = self.run_bin("record", "--db", self.db, "--duration", "1s", "--no-collector.gpu",
                         "--socket", os.path.join(self.tmp, "a.sock"), timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        with sqlite3.connect(self.db) as c:
            c.execute("DROP TABLE gpu_samples")
        r = self.run_bin("record", "--db", self.db, "--duration", "1s", "--no-collector.gpu",
                         "--socket", os.path.join(self.tmp, "a.sock"), timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"moved aside", r.stderr)
        self.assertIn(b"missing part of its schema", r.stderr)
        aside = [f for f in os.listdir(self.tmp) if f.startswith("sw.db.corrupt-") and not f.endswith(("-wal", "-shm"))]
        self.assertEqual(len(aside), 1, os.listdir(self.tmp))
        with sqlite3.connect(self.db) as c:
            self.assertGreater(c.execute("SELECT count(*) FROM disk_samples").fetchone()[0], 0)

    def test_the_http_head_bound_holds_when_the_head_arrives_whole(self):
        port = free_port()
        self.start_agent("--listen", f"127.0.0.1:{port}")
        # The socket is made before the endpoint listens: wait for the port too (refused on a
        # loaded machine otherwise).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        for size, expect in ((3000, b"200 OK"), (7000, b"431")):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size + b"\r\n\r\n")
                answer = s.recv(64)
            self.assertIn(expect, answer, size)

    def test_clients_that_abuse_the_endpoint_do_not_hold_the_ticks(self):
        """The endpoint is served by the sampling loop itself: slow clients, a connection flood,
        a client that never reads its answers and pipelined requests by the hundred must cost
        the ticks nothing (none late, none missing) while a scrape is still answered."""
        port = free_port()
        agent = self.start_agent("--listen", f"127.0.0.1:{port}")
        deadline = time.monotonic() + 10
        while b"stallwatch_intervals_total" not in get(f"http://127.0.0.1:{port}/metrics", timeout=2):
            self.assertLess(time.monotonic(), deadline, "no page")
            time.sleep(0.1)
        held = []
        for _ in range(80):  # past the 64 connections the endpoint keeps: the oldest are closed
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest (slowloris)
            held.append(c)
        # Requests by the hundred on one connection, whose answers are never read.
        glutton = socket.create_connection(("127.0.0.1", port), timeout=5)
        glutton.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        glutton.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 400)
        held.append(glutton)

        def counters():
            page = get(f"http://127.0.0.1:{port}/metrics", timeout=3).decode()
            values = dict(re.findall(r"^(stallwatch_intervals_total|stallwatch_late_ticks_total) (\S+)$",
                                     page, re.M))
            return float(values["stallwatch_intervals_total"]), float(values["stallwatch_late_ticks_total"])

        t0 = time.monotonic()
        first, late0 = counters()
        while time.monotonic() - t0 < 3:  # and a flood of connections opened and dropped meanwhile
            for _ in range(20):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                except OSError:
                    pass
            time.sleep(0.1)
        started = time.monotonic()
        last, late1 = counters()
        self.assertLess(time.monotonic() - started, 1.0, "a scrape waited behind the abusers")
        elapsed = time.monotonic() - t0
        # 200 ms ticks: about five a second, as many as the time allows, none skipped.
        self.assertGreaterEqual(last - first, elapsed / 0.2 - 3, (first, last, elapsed))
        self.assertEqual(late1 - late0, 0)
        for c in held:
            c.close()
        self.assertIsNone(agent.poll())

    def test_a_reload_refuses_an_unknown_key_and_says_what_it_cannot_change(self):
        config = os.path.join(self.tmp, "sw.conf")
        with open(config, "w") as f:
            f.write("[record]\nretain = \"14d\"\n")
        agent = self.start_agent("--config", config)
        with open(config, "w") as f:
            f.write("[record]\nretain = \"7d\"\n")
        agent.send_signal(1)
        time.sleep(0.6)
        with open(config, "w") as f:
            f.write("[record]\nretain = \"14d\"\nno_such_key = 1\n")
        agent.send_signal(1)
        time.sleep(0.6)
        agent.terminate()
        _, err = agent.communicate(timeout=15)
        self.assertEqual(agent.returncode, 0, err)
        self.assertIn(b"--retain changed from 14d to 7d: not reloaded", err)
        self.assertRegex(err, rb"reload: .*no_such_key.*the options in force are kept")

    def test_top_refuses_to_draw_into_a_file(self):
        out = os.path.join(self.tmp, "top.out")
        with open(out, "w") as f:
            r = subprocess.run([BIN, "top", "--db", RECORDING], stdout=f, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, timeout=10)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"use --once", r.stderr)
        self.assertEqual(os.path.getsize(out), 0)

    # --- Stop deadlines -------------------------------------------------------------------------

    def test_a_prometheus_servers_text_and_a_urls_password_never_reach_the_terminal(self):
        """Issue 46: a server's error text with escape sequences (a window title, a cleared
        screen, a fake prompt) is shown escaped, and the password in --prometheus's URL is said
        as ***@ in every line."""
        import http.server
        import threading

        class Hostile(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"status": "error", "errorType": "bad_data",
                                   "error": "\x1b]0;pwned\x07\x1b[2J\x1b[Hroot@prod:~# "}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Hostile)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        url = f"http://reader:s3cret@127.0.0.1:{server.server_address[1]}"
        out = subprocess.run([BIN, "report", "--prometheus", url, "--run", "slurm:1"],
                             capture_output=True, timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertNotIn(b"\x1b", out.stderr + out.stdout)
        self.assertNotIn(b"s3cret", out.stderr + out.stdout)
        self.assertIn(b"\\x1b]0;pwned", out.stderr)  # said, made visible
        self.assertIn(b"***@127.0.0.1", out.stderr)

    def prometheus_report(self, scenario, *extra):
        import fake_prometheus
        t0 = int(time.time()) - 300
        server, url = fake_prometheus.serve(scenario, t0)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        r = subprocess.run([BIN, "report", "--prometheus", url, "--run", fake_prometheus.RUN, "--since",
                            str(t0 - 10), "--until", str(t0 + 70), "--json", *extra], capture_output=True, text=True,
                           timeout=60)
        run = swjson.loads(r.stdout)["runs"][0] if r.returncode == 0 else None
        return r, run, t0 * 1000

    def test_a_prometheus_servers_values_are_checked(self):
        """Issue 46: values no agent exports are refused and counted, not used: NaN everywhere
        gave goodput 100 %, a GPU count of -1 gave 4294967295 GPUs, a series sent twice (the
        second x10) gave 983 % utilisation, +Inf samples a 100 ms step, and a counter rising
        1000x too slowly shifted the run 16 minutes early."""
        r, run, t0_ms = self.prometheus_report("healthy")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run["goodput"], 1.0)
        self.assertEqual(run["server_values_refused"], 0)
        healthy_start = run["start_ms"] - t0_ms  # against the run's start on the fake server
        r, run, _ = self.prometheus_report("nan")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(run["goodput"])
        self.assertTrue(run["goodput_unknown_because"])
        r, run, _ = self.prometheus_report("negative")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(run["goodput"])
        self.assertGreater(run["server_values_refused"], 0)
        self.assertTrue(all(0 <= n["gpus"] <= 1024 for n in run["nodes"]), run["nodes"])
        r, run, _ = self.prometheus_report("duplicate")
        self.assertEqual(r.returncode, 1)
        self.assertIn("twice in one answer", r.stderr)
        r, run, _ = self.prometheus_report("inf_spacing")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(run["interval_ms"], 1000)
        self.assertGreater(run["server_values_refused"], 0)
        # A step coarser than the samples (--prometheus-step 15s over 1 s scrapes) is said.
        r, run, _ = self.prometheus_report("healthy", "--prometheus-step", "15s")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run["step_coarser_than_samples"], {"step_ms": 15000, "samples_ms": 1000})
        r, run, t0_ms = self.prometheus_report("bad_counter")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLessEqual(abs(run["start_ms"] - t0_ms - healthy_start), 1000)  # not minutes early
        self.assertGreater(run["server_values_refused"], 0)

    def test_a_prometheus_report_has_one_deadline(self):
        """Issue 46: no bound on the whole command (46 requests of up to 120 s each). A server
        that answers each request after 2 s: --prometheus-deadline 3s ends it in about 3 s."""
        import http.server
        import threading

        class Slow(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                time.sleep(2)
                body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
                    {"metric": {"run": "slurm:1", "node": "n0", "instance": "i", "training_job": "slurm:1"},
                     "values": [[time.time() - 100, "1"]]}]}}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        started = time.monotonic()
        r = subprocess.run([BIN, "report", "--prometheus", f"http://127.0.0.1:{server.server_address[1]}",
                            "--run", "slurm:1", "--since", "1h", "--prometheus-deadline", "3s"],
                           capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("deadline of 3 s", r.stderr)
        self.assertLess(took, 6, took)
        r = subprocess.run([BIN, "report", "--prometheus", "http://127.0.0.1:1", "--run", "slurm:1",
                            "--prometheus-deadline", "0s"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_stop_kills_a_hung_hook_and_its_setsid_child_at_stop_timeout(self):
        """A job whose steps stall opens an incident; its hook hangs and starts a setsid child.
        SIGTERM: the agent ends within --stop-timeout (not the hook's 60 s), counts the hook as
        killed, and the child that left the hook's process group is gone too. A scrape while it
        stops gets the last page at once."""
        pids = os.path.join(self.tmp, "hook-pids")
        hook = os.path.join(self.tmp, "hook.sh")
        with open(hook, "w") as f:
            f.write(f"#!/bin/sh\nsetsid sleep 600 </dev/null >/dev/null 2>&1 &\necho $! >> {pids}\n"
                    f"echo $$ >> {pids}\nexec sleep 600\n")
        os.chmod(hook, 0o755)
        port = free_port()
        agent = self.start_agent("--on-incident", hook, "--hook-timeout", "60s", "--stop-timeout", "2s",
                                 "--listen", f"127.0.0.1:{port}",
                                 "--stall-open-after", "1s", "--stall-open-after-strong", "1s",
                                 "--idle-stall-open-after", "1s")  # the sleeping loop looks idle
        stall = """
import time, stallwatch
def batches():
    for i in range(600):
        if 400 <= i:
            time.sleep(0.5)      # the input stops keeping up: steps slow 25x
        else:
            time.sleep(0.002)
        yield [0] * 4
for b in stallwatch.watch(batches()):
    time.sleep(0.018)
"""
        env = dict(os.environ, STALLWATCH_SOCKET=self.sock, PYTHONPATH=PACKAGE)
        job = subprocess.Popen([sys.executable, "-c", stall], env=env)
        self.procs.append(job)
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and not (os.path.exists(pids) and len(open(pids).read().split()) >= 2):
            time.sleep(0.2)
        if not os.path.exists(pids):
            agent.terminate()
            self.fail("no incident ran the hook: " + agent.communicate(timeout=20)[1].decode()[-3000:])
        child, hook_pid = [int(x) for x in open(pids).read().split()[:2]]
        t0 = time.monotonic()
        agent.terminate()
        time.sleep(0.5)  # the loop has ended; the hook holds the stop for its 2 s
        self.assertIsNone(agent.poll())
        self.assertIn(b"stallwatch_intervals_total", get(f"http://127.0.0.1:{port}/metrics", timeout=1))
        _, err = agent.communicate(timeout=70)
        took = time.monotonic() - t0
        self.assertEqual(agent.returncode, 0, err)
        self.assertLess(took, 2 + 3, err[-2000:])
        self.assertRegex(err, rb"hook: 1 started, .* 1 killed at the timeout")
        time.sleep(0.2)
        for pid in (hook_pid, child):
            alive = os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z"
            self.assertFalse(alive, pid)


if __name__ == "__main__":
    unittest.main()
