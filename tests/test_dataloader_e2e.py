"""End-to-end tests of the dataloader path: a real Python process using the stallwatch
package feeds a running agent through its socket; hostile traffic does not hurt the agent."""

import json
import swjson
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PACKAGE = os.path.join(ROOT, "python")

SLOW_LOOP = """
import time, stallwatch
waited = stepped = 0.0
def slow():
    global waited
    for i in range(20):
        t = time.perf_counter()
        time.sleep(0.05)          # the data takes 50 ms to come
        waited += time.perf_counter() - t
        yield list(range(8))      # 8 samples per batch
for batch in stallwatch.watch(slow()):
    t = time.perf_counter()
    time.sleep(0.02)              # the step takes 20 ms
    stepped += time.perf_counter() - t
print(waited, stepped)            # what the sleeps really took, on a loaded machine too
"""


def vm_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class DataloaderE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-dl-")
        self.db = os.path.join(self.tmp, "sw.db")
        self.sock = os.path.join(self.tmp, "dl.sock")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_agent(self, *extra):
        def identity():
            st = os.stat(self.sock)
            return (st.st_ino, st.st_ctime_ns)  # an inode number can be reused at once

        stale = identity() if os.path.exists(self.sock) else None
        agent = subprocess.Popen(
            [BIN, "record", "--db", self.db, "--socket", self.sock, "--interval", "200ms",
             "--no-collector.gpu", "--no-collector.pressure", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(100):
            if os.path.exists(self.sock) and identity() != stale:
                return agent
            time.sleep(0.02)
        agent.kill()
        self.fail("the agent did not create its socket: " + agent.communicate()[1])

    def stop_agent(self, agent):
        agent.terminate()
        _, err = agent.communicate(timeout=10)
        self.assertEqual(agent.returncode, 0, err)
        return err

    def test_python_loop_reports_steps_and_waits(self):
        agent = self.start_agent()
        env = dict(os.environ, STALLWATCH_SOCKET=self.sock, PYTHONPATH=PACKAGE)
        loop = subprocess.run([sys.executable, "-c", SLOW_LOOP], env=env, timeout=30,
                              capture_output=True, text=True)
        self.assertEqual(loop.returncode, 0, loop.stderr)
        slept_waiting, slept_stepping = map(float, loop.stdout.split())
        time.sleep(1.0)  # the agent's next ticks take the last datagram and see the exit
        self.stop_agent(agent)
        with sqlite3.connect(self.db) as db:
            steps, samples, wait, step = db.execute(
                "SELECT sum(steps), sum(samples), sum(data_wait_seconds), sum(step_seconds) "
                "FROM job_samples").fetchone()
            jobs = db.execute("SELECT label, ended_ms FROM jobs").fetchall()
        self.assertEqual(steps, 20)
        self.assertEqual(samples, 160)
        # Within a few milliseconds of what the controlled waits really took...
        self.assertAlmostEqual(wait, slept_waiting, delta=0.005)
        self.assertAlmostEqual(step, slept_stepping, delta=0.005)
        # ...which are the nominal 1.0 s and 0.4 s, give or take the sleeps' overshoot.
        self.assertGreaterEqual(wait, 1.0)
        self.assertLess(wait, 1.3)
        self.assertEqual(len(jobs), 1)
        self.assertTrue(jobs[0][0].startswith("python3 -c") or jobs[0][0].startswith("python"), jobs)
        self.assertNotIn("\n", jobs[0][0])
        self.assertIsNotNone(jobs[0][1], "the job's end was not recorded")
        listing = swjson.loads(subprocess.run([BIN, "jobs", "--db", self.db, "--json"],
                                            capture_output=True, text=True, check=True).stdout)
        self.assertEqual(len(listing), 1)
        self.assertAlmostEqual(listing[0]["data_wait_share"], 1.0 / 1.4, delta=0.03)
        self.assertGreater(listing[0]["steps_per_second"], 5)

    def test_the_wheel_in_a_virtualenv_reports_to_the_agent(self):
        """Issue 43: training runs in a virtualenv or a conda environment, which does not see
        the system's dist-packages. The wheel scripts/python_wheel.sh builds (offline, the
        agent's version) installs there with pip, no index, and its loop reports to the agent."""
        wheels = os.path.join(self.tmp, "wheels")
        built = subprocess.run([os.path.join(ROOT, "scripts", "python_wheel.sh"), wheels],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(built.returncode, 0, built.stderr)
        wheel = built.stdout.strip().splitlines()[-1]
        self.assertRegex(os.path.basename(wheel), r"^stallwatch-\d+\.\d+\.\d+-py3-none-any\.whl$")
        venv = os.path.join(self.tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True, timeout=120)
        pip = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "-q", wheel],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(pip.returncode, 0, pip.stderr)
        version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.split()[1]
        agent = self.start_agent()
        # No PYTHONPATH: the venv's own site-packages is where it comes from.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["STALLWATCH_SOCKET"] = self.sock
        loop = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                               "import stallwatch; print(stallwatch.__version__, stallwatch.__file__)\n"
                               + SLOW_LOOP], env=env, timeout=30, capture_output=True, text=True)
        self.assertEqual(loop.returncode, 0, loop.stderr)
        self.assertEqual(loop.stdout.split()[0], version)  # the agent's version
        self.assertIn(os.path.join(venv, "lib"), loop.stdout.split()[1])
        time.sleep(1.0)
        self.stop_agent(agent)
        with sqlite3.connect(self.db) as db:
            steps = db.execute("SELECT sum(steps) FROM job_samples").fetchone()[0]
        self.assertEqual(steps, 20)

    def test_senders_of_one_launcher_are_one_job(self):
        # Two launchers fork short-lived senders: 40 and 10, overlapping, each sender a datagram
        # then 1 s of life. A third launcher runs in a session of its own (as an interactive
        # shell does): its 3 senders stay jobs of their own. Before, every sender was a job.
        launcher = """
import os, socket, sys, time
n, path = int(sys.argv[1]), sys.argv[2]
for i in range(n):
    if os.fork() == 0:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"stallwatch.dataloader.steps:1|c", path)
        time.sleep(1.0)
        os._exit(0)
    time.sleep(0.05)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
time.sleep(0.5)
"""
        agent = self.start_agent()
        runs = [subprocess.Popen([sys.executable, "-c", launcher, str(n), self.sock], start_new_session=own)
                for n, own in ((40, False), (10, False), (3, True))]
        for r in runs:
            self.assertEqual(r.wait(timeout=30), 0)
        time.sleep(0.5)
        self.stop_agent(agent)
        with sqlite3.connect(self.db) as db:
            jobs = db.execute("SELECT job_key FROM jobs").fetchall()
            steps = dict(db.execute("SELECT j.job_key, sum(s.steps) FROM job_samples s "
                                    "JOIN jobs j USING (job_id) GROUP BY j.job_key").fetchall())
        # One job per launcher that is not a session leader, one per sender of the one that is.
        self.assertEqual(len(jobs), 2 + 3, jobs)
        # Each launcher's steps in one job (a sender gone before the agent's next tick on a loaded
        # host is not attributed: at least most of them).
        totals = sorted(v or 0 for v in steps.values())
        self.assertGreaterEqual(totals[-1], 30, steps)
        self.assertGreaterEqual(totals[-2], 7, steps)
        self.assertLessEqual(totals[-1], 40, steps)

    def test_hostile_datagrams_are_counted_and_memory_stays_bounded(self):
        agent = self.start_agent()
        client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        rng = random.Random(7)
        valid = b"stallwatch.dataloader.steps:1|c\nstallwatch.dataloader.wait:5|ms\n"
        kinds = [
            lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))),
            lambda: b"x" * 20000,  # oversized
            lambda: b"stallwatch.dataloader.steps:abc|c\n:|\n|||\nname:1|zz\n",
            lambda: b"a" * 500 + b":1|c\n",  # name too long
            lambda: b"m:1|c|#" + b",".join([b"t"] * 100) + b"\n",  # too many tags
            lambda: b"unknown.metric:1|g\n",
            lambda: valid,
        ]
        time.sleep(0.3)
        rss_before = vm_rss_kb(agent.pid)
        sent = 0
        deadline = time.monotonic() + 3.0  # bounded flood: 3 s or 200k datagrams
        while time.monotonic() < deadline and sent < 200_000:
            try:
                client.sendto(kinds[sent % len(kinds)](), self.sock)
                sent += 1
            except (BlockingIOError, ConnectionRefusedError, OSError):
                time.sleep(0.001)  # the socket buffer is full: the kernel bounds the queue
        time.sleep(0.5)
        rss_after = vm_rss_kb(agent.pid)
        self.assertIsNone(agent.poll(), "the agent died under the flood")
        err = self.stop_agent(agent)
        m = re.search(r"dataloader socket: (\d+) datagrams, (\d+) metrics, (\d+) malformed lines, "
                      r"(\d+) unknown metrics, (\d+) oversized datagrams", err)
        self.assertIsNotNone(m, err)
        datagrams, metrics, malformed, unknown, oversized = map(int, m.groups())
        self.assertGreater(datagrams, 1000, f"sent {sent}")
        self.assertGreater(malformed, 0)
        self.assertGreater(oversized, 0)
        self.assertGreater(unknown, 0)
        self.assertLess(rss_after - rss_before, 8 * 1024, f"RSS grew {rss_before} -> {rss_after} kB")
        # Warnings are rate-limited: a few lines, not one per bad datagram.
        self.assertLess(err.count("malformed line"), 10)

    def test_second_agent_refuses_a_live_socket_and_replaces_a_stale_one(self):
        agent = self.start_agent()
        second = subprocess.run([BIN, "record", "--db", os.path.join(self.tmp, "b.db"), "--socket",
                                 self.sock, "--duration", "1s", "--interval", "500ms",
                                 "--no-collector.gpu"], capture_output=True, text=True, timeout=10)
        self.assertIn("another agent is listening", second.stderr)
        agent.kill()  # leaves its socket file behind
        agent.wait()
        self.assertTrue(os.path.exists(self.sock))
        third = self.start_agent()
        err = self.stop_agent(third)
        self.assertIn("dataloader socket at", err)
        self.assertFalse(os.path.exists(self.sock), "the socket was not removed at exit")
        fourth = self.start_agent("--socket-mode", "0600")
        mode = os.stat(self.sock).st_mode & 0o777
        self.stop_agent(fourth)
        self.assertEqual(mode, 0o600)

    def record_briefly(self, sock, *extra):
        return subprocess.run([BIN, "record", "--db", self.db, "--socket", sock, "--duration", "1s",
                               "--interval", "500ms", "--no-collector.gpu", "--health-interval", "0s",
                               *extra], capture_output=True, text=True, timeout=20)

    # A directory another user owns, can write or has made a symlink would let them swap the
    # socket for theirs: refused, said, and the agent records without it.
    def test_socket_directory_others_could_write_is_refused(self):
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        run = self.record_briefly(os.path.join(shared, "dl.sock"))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("is writable by others (mode 0777)", run.stderr)
        self.assertFalse(os.path.exists(os.path.join(shared, "dl.sock")))

        real = os.path.join(self.tmp, "real")
        os.mkdir(real, 0o755)
        link = os.path.join(self.tmp, "link")
        os.symlink(real, link)
        run = self.record_briefly(os.path.join(link, "dl.sock"))
        self.assertIn("is a symbolic link", run.stderr)
        self.assertFalse(os.path.exists(os.path.join(real, "dl.sock")))

        if os.geteuid() == 0:
            theirs = os.path.join(self.tmp, "theirs")
            os.mkdir(theirs, 0o755)
            os.chown(theirs, 65534, 65534)
            run = self.record_briefly(os.path.join(theirs, "dl.sock"))
            self.assertIn("belongs to uid 65534", run.stderr)

    def test_socket_group_lets_its_members_report(self):
        import grp
        group = grp.getgrgid(os.getgid() if os.geteuid() != 0 else 1)  # root may give any group
        agent = self.start_agent("--socket-group", group.gr_name)
        st = os.stat(self.sock)
        self.stop_agent(agent)
        self.assertEqual(st.st_gid, group.gr_gid)
        self.assertEqual(st.st_mode & 0o777, 0o660)
        bad = self.record_briefly(self.sock, "--socket-group", "no-such-group-here")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--socket-group 'no-such-group-here' is not a group", bad.stderr)


if __name__ == "__main__":
    unittest.main()
