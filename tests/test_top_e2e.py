"""End-to-end tests of `stallwatch top`: a frame of a committed recording as of a time, and
the live view in a real terminal (tmux, 80x24) beside a recorder and a Python job that reports
its steps and then stalls."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "python")
NEIGHBOUR = os.path.join(HERE, "fixtures", "recordings", "h100-neighbours", "neighbour.db")

# 20 steps a second for 14 s, then one batch that takes 25 s to come (the loop stalls), then on.
JOB = """
import time, stallwatch
def batches():
    start = time.time()
    stalled = False
    while time.time() - start < 60:
        if not stalled and time.time() - start > 14:
            stalled = True
            time.sleep(25)
        time.sleep(0.03)
        yield [0] * 8
for b in stallwatch.watch(batches()):
    time.sleep(0.02)
"""


class TopE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-top-")
        self.procs = []
        self.session = f"swtop{os.getpid()}"

    def tearDown(self):
        subprocess.run(["tmux", "kill-session", "-t", self.session], capture_output=True)
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_frame_of_a_recording_at_a_time(self):
        db = os.path.join(self.tmp, "n.db")
        shutil.copy(NEIGHBOUR, db)
        # 02:57:30, 13 s into the neighbour's reads: the job starved, the incident open.
        r = subprocess.run([BIN, "top", "--db", db, "--once", "--at", "1795402650000"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertLessEqual(len(lines), 24)
        self.assertTrue(all(len(line) <= 80 for line in lines), lines)
        self.assertIn("1 job(s), 1 open incident(s)", r.stdout)
        # The data wait as `jobs` and /metrics give it: the wait over the wait and the steps.
        self.assertRegex(r.stdout, r">  1    python3 /work/main/tests/gpu/train_j +8\.0 +89 % +0 % +20\.9")
        self.assertRegex(r.stdout, r"loop0 +14\.43ms +- +7\.36")
        self.assertIn("OPEN disk-slow loop0 (on vda) since 02:57:17", r.stdout)
        r = subprocess.run([BIN, "top", "--db", db, "--once", "--at", "1795402650000", "--evidence"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("* neighbour_bytes_per_s vda /stallwatch/neighbour", r.stdout)
        # Before the job was found, the host's devices as iostat would show them (busiest
        # first) and its pressure, in 80 columns: the neighbour already reads vda.
        r = subprocess.run([BIN, "top", "--db", db, "--once", "--at", "1795402612000"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("No job in the last minute", r.stdout)
        self.assertIn("pressure (some)   io 44 %   cpu 0 %   memory 0 %", r.stdout)
        self.assertRegex(r.stdout, r"DEVICE +READ MB/s WRITE MB/s +r_await +w_await +aqu-sz +%util\n"
                                   r"  vda +167\.0 +0\.0 +2\.98ms +- +0\.45 +21 %\n")
        self.assertTrue(all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout)
        # Long before the recording: nothing to show, said so.
        r = subprocess.run([BIN, "top", "--db", db, "--once", "--at", "1795402000000"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("No job in the last minute", r.stdout)
        self.assertIn("no device samples in the last minute", r.stdout)

    def screen(self):
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.session],
                              capture_output=True, text=True).stdout

    def wait_for(self, what, timeout):
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if what(text):
                return text
            time.sleep(0.5)
        self.fail(f"not on the screen within {timeout} s:\n{text}")

    def test_live_view_in_a_terminal(self):
        if not shutil.which("tmux"):
            self.fail("tmux is not installed (scripts/install-deps.sh installs it)")
        db, sock = os.path.join(self.tmp, "sw.db"), os.path.join(self.tmp, "dl.sock")
        agent = subprocess.Popen([BIN, "record", "--db", db, "--interval", "1s", "--flush-interval", "1s",
                                  "--no-collector.gpu", "--socket", sock,
                                  # The job's stall is a sleep, its process idle: held this long
                                  # (2 min by default) before it is an incident (a job winding
                                  # down idles so).
                                  "--idle-stall-open-after", "3s"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.procs.append(agent)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        job_file = os.path.join(self.tmp, "toploop.py")
        with open(job_file, "w") as f:
            f.write(JOB)
        env = dict(os.environ, STALLWATCH_SOCKET=sock, PYTHONPATH=PACKAGE)
        self.procs.append(subprocess.Popen([sys.executable, job_file], env=env))
        subprocess.run(["tmux", "new-session", "-d", "-s", self.session, "-x", "80", "-y", "24",
                        f"{BIN} top --db {db}"], check=True)
        # The job and its step rate (20 a second, give or take the sleeps' overshoot).
        text = self.wait_for(lambda t: "toploop.py" in t and "steps/s 1" in t, 20)
        self.assertIn("1 job(s)", text)
        # The stall: an open incident, on the screen within seconds.
        text = self.wait_for(lambda t: "OPEN " in t, 30)
        self.assertRegex(text, r"OPEN (not-storage|io-throttled|input-cpu) .* since \d\d:\d\d:\d\d")
        self.wait_for(lambda t: "steps/s 0.0" in t, 10)  # the loop sends nothing: 0, not unknown
        # v: the incident's evidence; v again: back; q: quits.
        subprocess.run(["tmux", "send-keys", "-t", self.session, "v"], check=True)
        self.wait_for(lambda t: "EVIDENCE (* supports)" in t, 5)
        subprocess.run(["tmux", "send-keys", "-t", self.session, "v"], check=True)
        self.wait_for(lambda t: "DEVICE / MOUNT" in t or "No open incident" in t or "OPEN " in t, 5)
        subprocess.run(["tmux", "send-keys", "-t", self.session, "q"], check=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and subprocess.run(
                ["tmux", "has-session", "-t", self.session], capture_output=True).returncode == 0:
            time.sleep(0.2)
        self.assertNotEqual(subprocess.run(["tmux", "has-session", "-t", self.session],
                                           capture_output=True).returncode, 0, "q did not quit")
        self.assertIsNone(agent.poll(), "the agent went on recording")


if __name__ == "__main__":
    unittest.main()
