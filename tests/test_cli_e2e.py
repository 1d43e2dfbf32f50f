"""The command line as a Unix tool's (issue 44): usage errors exit 2 and say what was meant,
--help is free of the parser's type noise and ends with examples, "-" is standard output,
a --db in a folder that does not exist is refused (none made), `top --job` takes a job id.

Usage: python3 -m unittest test_cli_e2e   (STALLWATCH_BIN names the binary)"""
import grp
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

BIN = os.path.abspath(os.environ.get("STALLWATCH_BIN", "../build/stallwatch"))
RECORDING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings",
                         "h200-stall-disk.db")
COMMANDS = ["record", "devices", "jobs", "incidents", "report", "replay", "export", "health", "top", "run"]


def sw(*args, cwd=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


class CommandLine(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-cli-")
        self.db = os.path.join(self.tmp, "r.db")
        shutil.copy(RECORDING, self.db)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_usage_errors_exit_2_and_say_what_was_meant(self):
        for args, meant in ((["recrod"], "did you mean 'record'"),
                            (["report", "--dbb", self.db], "--dbb: did you mean --db?"),
                            (["report", "--db", self.db, "--jsn"], "--jsn: did you mean --json?"),
                            (["jobs", "--db"], "stallwatch jobs --help"),
                            (["frobnicate"], "the commands: record, devices"),
                            ([], "A subcommand is required"),
                            (["record", "--interval", "fast"], "not a duration")):
            r = sw(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(meant, r.stderr, args)
            self.assertEqual(r.stdout, "", args)

    def test_help_is_free_of_parser_noise_and_shows_examples(self):
        for command in COMMANDS:
            r = sw(command, "--help")
            self.assertEqual(r.returncode, 0, (command, r.stderr))
            for noise in ("TEXT", "{false}", "{true}", "UINT", ":INT", "=", "REQUIRED"):
                lines = [line for line in r.stdout.splitlines() if line.startswith("  -")]
                head = [line.split("  ", 2)[1] if line.startswith("  -") else "" for line in lines]
                self.assertFalse(any(noise in h for h in head), (command, noise, head))
            self.assertIn("\nExamples:\n  stallwatch " + command, r.stdout, command)
        self.assertEqual(sw("--help").returncode, 0)
        self.assertRegex(sw("--version").stdout, r"^stallwatch \d+\.\d+\.\d+ \(\S+\)")

    def test_dash_is_standard_output(self):
        r = sw("report", "--db", self.db, "--html", "-", cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("<!DOCTYPE html>"), r.stdout[:100])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "-")))
        r = sw("report", "--db", self.db, "--html", "-", "--json")
        self.assertEqual(r.returncode, 2)
        self.assertIn("both go to standard output", r.stderr)
        r = sw("replay", "--db", self.db, "--metrics-file", "-", "--log-level", "off")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("stallwatch_incidents_total{class=\"disk-slow\"} 1", r.stdout)

    def test_a_db_in_a_missing_folder_is_refused_not_made(self):
        missing = os.path.join(self.tmp, "no-such-dir", "x.db")
        r = sw("record", "--db", missing, "--duration", "1s", "--no-collector.gpu")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("does not exist", r.stderr)
        self.assertFalse(os.path.exists(os.path.dirname(missing)))

    def test_top_job_is_the_job_id(self):
        at = "1795318660000"  # inside the recorded run
        r = sw("top", "--db", self.db, "--once", "--at", at, "--job", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\n>  1 ")
        r = sw("top", "--db", self.db, "--once", "--at", at, "--job", "7")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job 7", r.stderr)


    def test_shell_completion_from_the_parser(self):
        """`stallwatch completion bash|zsh`, made from the parser: commands, each command's own
        options, file names after an option whose value is a path, the choices of
        --log-level; driven through bash's completion function and a real interactive zsh."""
        script = os.path.join(self.tmp, "stallwatch.bash")
        with open(script, "w") as f:
            f.write(subprocess.run([BIN, "completion", "bash"], capture_output=True, text=True,
                                   check=True).stdout)
        open(os.path.join(self.tmp, "run7.db"), "w").close()

        def bash(line):
            words = line.split(" ")
            driver = (f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
                      f"COMP_CWORD={len(words) - 1}; _stallwatch; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
            out = subprocess.run(["bash", "-c", driver], capture_output=True, text=True, cwd=self.tmp)
            self.assertEqual(out.returncode, 0, out.stderr)
            return sorted(out.stdout.split())

        self.assertEqual(bash("stallwatch rep"), ["replay", "report"])
        self.assertEqual(bash("stallwatch report --js"), ["--json"])
        self.assertEqual(bash("stallwatch record --qui"), ["--quiet"])  # record's own, not report's
        self.assertEqual(bash("stallwatch report --qui"), [])
        self.assertEqual(bash("stallwatch report --db ru"), ["run7.db"])
        self.assertEqual(bash("stallwatch --log-level w"), ["warn"])
        self.assertEqual(bash("stallwatch record --interval "), [])  # a duration: no file names
        self.assertIn("completion", bash("stallwatch "))

        zsh = shutil.which("zsh")
        self.assertIsNotNone(zsh, "zsh is one of the test tools (scripts/install-deps.sh --dev)")
        fpath = os.path.join(self.tmp, "zfunc")
        os.makedirs(fpath)
        with open(os.path.join(fpath, "_stallwatch"), "w") as f:
            f.write(subprocess.run([BIN, "completion", "zsh"], capture_output=True, text=True,
                                   check=True).stdout)
        driver = os.path.join(self.tmp, "drive.zsh")
        with open(driver, "w") as f:
            f.write(f"""zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "fpath=({fpath} \\$fpath); autoload -U compinit; compinit -u -D; PS1='> '"
sleep 0.5
zpty -w -n z "stallwatch report --js"$'\\t'
# Read until the completion shows, for up to 20 s: a loaded machine is slow to start zsh.
out=""
for i in {{1..40}}; do
  while zpty -r -t z chunk; do out+=$chunk; done
  [[ $out == *"report --json"* ]] && break
  sleep 0.5
done
print -r -- "$out"
zpty -d z
""")
        out = subprocess.run([zsh, "-f", driver], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "PATH": os.path.dirname(BIN) + ":" + os.environ["PATH"]})
        self.assertIn("stallwatch report --json", out.stdout.replace("\r", ""), out.stdout[-500:])

    def test_record_in_a_terminal_shows_a_status_line(self):
        """On a terminal, record rewrites one status line in place (jobs, incidents open,
        intervals written) every few seconds; a log line clears it first; --quiet, or stderr
        not a terminal, shows none."""
        import pty
        import select
        import signal
        import time

        def stderr_of(extra, tty):
            db = os.path.join(self.tmp, f"status-{len(extra)}-{tty}.db")
            args = [BIN, "record", "--db", db, "--interval", "200ms", "--no-collector.gpu",
                    "--health-interval", "0s", *extra]
            if not tty:
                p = subprocess.run(args + ["--duration", "6s"], capture_output=True, timeout=60)
                return p.stderr
            leader, follower = pty.openpty()
            p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=follower)
            os.close(follower)
            out, deadline = b"", time.monotonic() + 6.5
            while time.monotonic() < deadline:
                if select.select([leader], [], [], 0.2)[0]:
                    try:
                        out += os.read(leader, 65536)
                    except OSError:
                        break
            p.send_signal(signal.SIGINT)
            p.wait(timeout=30)
            try:
                while select.select([leader], [], [], 0.5)[0]:
                    chunk = os.read(leader, 65536)
                    if not chunk:
                        break
                    out += chunk
            except OSError:
                pass
            os.close(leader)
            return out

        shown = stderr_of([], True)
        self.assertRegex(shown, rb"\r\x1b\[Krecording: \d+ jobs?, \d+ incidents? open, \d+ intervals? written \(\d+ dropped")
        # The final log lines start by clearing it, so none runs into the status.
        self.assertRegex(shown, rb"\r\x1b\[K\[[^\]]+\] \[[^\]]*info[^\]]*\] recorded \d+ intervals")
        self.assertNotIn(b"recording: ", stderr_of(["--quiet"], True))
        piped = stderr_of([], False)
        self.assertNotIn(b"recording: ", piped)
        self.assertNotIn(b"\x1b[K", piped)

    def test_log_lines_for_the_journal_and_for_people(self):
        """Under systemd (JOURNAL_STREAM naming stderr) each line is "<N>message": the journal takes
        N as its priority (`journalctl -p warning` then filters) and stamps the time itself; to a
        terminal or a file, the date and time with the zone."""
        with open(os.path.join(self.tmp, "stderr"), "w+") as err:
            st = os.fstat(err.fileno())
            env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
            r = subprocess.run([BIN, "record", "--db", os.path.join(self.tmp, "j.db"), "--duration", "1s",
                                "--no-collector.gpu", "--socket", os.path.join(self.tmp, "s.sock")],
                               stderr=err, env=env, timeout=30)
            err.seek(0)
            lines = err.read().splitlines()
        self.assertEqual(r.returncode, 0, lines)
        self.assertTrue(lines)
        self.assertTrue(all(line[:3] in ("<6>", "<4>", "<3>", "<7>", "<2>") for line in lines), lines)
        self.assertTrue(any(line.startswith("<6>recording to ") for line in lines), lines)
        self.assertFalse(any(line[3:4] == "[" for line in lines), lines)  # no timestamp of its own
        r = subprocess.run([BIN, "record", "--db", os.path.join(self.tmp, "k.db"), "--duration", "1s",
                            "--no-collector.gpu", "--socket", os.path.join(self.tmp, "t.sock")],
                           capture_output=True, text=True, timeout=30, env={k: v for k, v in os.environ.items()
                                                                            if k != "JOURNAL_STREAM"})
        self.assertRegex(r.stderr, r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d\d:\d\d\] \[info\] ")


    def test_times_are_local_with_their_zone_or_utc(self):
        """The text says each time's zone; a time without an offset is read in the zone shown, as
        `date -d` reads it: local by default, UTC with --utc (issue 44)."""
        paris = dict(os.environ, TZ="Europe/Paris")
        local = subprocess.run([BIN, "report", "--db", self.db], capture_output=True, text=True, env=paris)
        self.assertIn("span        2026-11-22 04:37:19 CET .. 2026-11-22 04:38:34 CET", local.stdout)
        utc = subprocess.run([BIN, "--utc", "report", "--db", self.db], capture_output=True, text=True, env=paris)
        self.assertIn("span        2026-11-22 03:37:19 UTC .. 2026-11-22 03:38:34 UTC", utc.stdout)
        # The stall is 03:37:33 .. 03:37:53 UTC: from 04:37:40 Paris time is inside it.
        since = subprocess.run([BIN, "report", "--db", self.db, "--json", "--since", "2026-11-22T04:37:40"],
                               capture_output=True, text=True, env=paris)
        since_utc = subprocess.run([BIN, "--utc", "report", "--db", self.db, "--json", "--since",
                                    "2026-11-22T03:37:40"], capture_output=True, text=True, env=paris)
        self.assertEqual(since.returncode, 0, since.stderr)
        self.assertEqual(json.loads(since.stdout)["jobs"], json.loads(since_utc.stdout)["jobs"])
        self.assertLessEqual(abs(json.loads(since.stdout)["jobs"][0]["start_ms"] / 1000 - 1795318660), 1.5)


    def test_a_non_root_agent_says_what_it_cannot_see(self):
        """Issue 43: as nobody, following root's process, the agent said nothing about the /proc
        files it could not read."""
        os.chmod(self.tmp, 0o777)
        sleeper = subprocess.Popen(["sleep", "30"])
        self.addCleanup(sleeper.kill)
        r = subprocess.run([BIN, "record", "--db", os.path.join(self.tmp, "n.db"), "--duration", "2s",
                            "--no-collector.gpu", "--socket", os.path.join(self.tmp, "n.sock"),
                            "--pid", str(sleeper.pid)], capture_output=True, text=True, timeout=30,
                           user=65534, group=65534)
        self.assertEqual(r.returncode, 0, r.stderr)
        said = [line for line in r.stderr.splitlines() if "cannot read" in line]
        self.assertEqual(len(said), 1, r.stderr)  # once for the job
        self.assertIn(f"/proc/{sleeper.pid}/io", said[0])
        self.assertIn("the agent runs as uid 65534", said[0])

    def test_the_recordings_group_reads_it_and_others_are_told_which(self):
        """Issue 43: record --db-group shares the DB with a group; a member reads it with jobs,
        report and top; anyone else is told "permission denied" and the group to join."""
        os.chmod(self.tmp, 0o755)
        share = os.path.join(self.tmp, "share")
        os.mkdir(share)
        db = os.path.join(share, "node.db")
        users = grp.getgrnam("users").gr_gid  # a group every Debian has
        r = subprocess.run([BIN, "record", "--db", db, "--duration", "2s", "--no-collector.gpu", "--db-group", "users",
                            "--socket", os.path.join(self.tmp, "g.sock")], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((os.stat(db).st_gid, stat.S_IMODE(os.stat(db).st_mode)), (users, 0o640))
        self.assertEqual((os.stat(share).st_gid, stat.S_IMODE(os.stat(share).st_mode)), (users, 0o750))
        member = dict(user=65534, group=65534, extra_groups=[users])
        for args in (["jobs"], ["report"], ["top", "--once"]):
            r = subprocess.run([BIN, *args, "--db", db], capture_output=True, text=True, timeout=30, **member)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
        r = subprocess.run([BIN, "jobs", "--db", db], capture_output=True, text=True, timeout=30,
                           user=65534, group=65534, extra_groups=[])
        self.assertEqual(r.returncode, 1)
        self.assertIn("permission denied", r.stderr)
        self.assertIn("sudo usermod -aG users", r.stderr)


if __name__ == "__main__":
    unittest.main()
