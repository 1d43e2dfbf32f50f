"""End-to-end tests of the real `stallwatch` binary: a real SQLite file, fixture trees and this
host's own /proc and /sys. Run through CTest, which sets STALLWATCH_BIN and STALLWATCH_FIXTURES."""

import json
import swjson
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import sys
import threading
import time
import unittest

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
FIXTURES = os.environ.get("STALLWATCH_FIXTURES", os.path.join(os.path.dirname(__file__), "fixtures"))


def rows_per_device(db_path):
    with sqlite3.connect(db_path) as db:
        return dict(db.execute(
            "SELECT d.name, count(*) FROM disk_samples s JOIN block_devices d USING (device_id) "
            "GROUP BY d.name").fetchall())


def diskstats_names(path):
    """Devices that did some I/O since boot (the agent leaves out those that never did)."""
    names = set()
    with open(path) as f:
        for line in f:
            f_ = line.split()
            if len(f_) < 14:
                continue
            reads, writes, in_flight, io_ticks = int(f_[3]), int(f_[7]), int(f_[11]), int(f_[12])
            discards = int(f_[14]) if len(f_) >= 18 else 0
            flushes = int(f_[18]) if len(f_) >= 20 else 0
            if reads or writes or in_flight or io_ticks or discards or flushes:
                names.add(f_[2])
    return names


class RecordE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-e2e-")
        self.db = os.path.join(self.tmp, "sw.db")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_kubernetes_daemonset_starts_the_agent(self):
        """The DaemonSet's container, as the kubelet would start it (its args, the node name
        from the downward API), with its hostPath mounts under a scratch directory: the agent
        records, serves /metrics and opens the socket pods report to."""
        import socket as sockets
        import urllib.request
        import yaml
        manifest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy",
                                "kubernetes", "base", "daemonset.yaml")
        with open(manifest) as f:
            docs = list(yaml.safe_load_all(f))
        ds = next(d for d in docs if d["kind"] == "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        self.assertTrue(pod["hostPID"])
        host_paths = {v["hostPath"]["path"] for v in pod["volumes"]}
        self.assertTrue({"/sys", "/var/log/pods", "/run/stallwatch", "/var/lib/stallwatch"} <= host_paths)
        container = pod["containers"][0]
        with sockets.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {e["name"]: "node-a" for e in container["env"] if e["name"] == "NODE_NAME"}
        args = [a.replace("$(NODE_NAME)", env["NODE_NAME"]).replace("/var/lib/stallwatch", self.tmp)
                .replace("/run/stallwatch", self.tmp).replace(":9877", f"127.0.0.1:{port}")
                for a in container["args"]]
        self.assertEqual(container["ports"][0]["containerPort"], 9877)  # one port everywhere
        agent = subprocess.Popen([BIN, *args, "--no-collector.gpu"], stderr=subprocess.PIPE, text=True)
        try:
            body, deadline = "", time.monotonic() + 15
            while "stallwatch_intervals_total" not in body and time.monotonic() < deadline:
                time.sleep(0.3)
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                except OSError:
                    pass
            self.assertIn("stallwatch_disk_read_time_seconds_total", body)
            self.assertTrue(os.path.exists(os.path.join(self.tmp, "dataloader.sock")))
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.communicate(timeout=30)
        self.assertEqual(agent.returncode, 0)
        with sqlite3.connect(os.path.join(self.tmp, "stallwatch.db")) as db:
            self.assertGreater(db.execute("SELECT count(*) FROM disk_samples").fetchone()[0], 0)

    def test_systemd_is_told_ready_status_reloading_and_stopping(self):
        """Type=notify: the agent tells the service manager (NOTIFY_SOCKET, a datagram socket the
        test holds as systemd would) READY=1 once recording, its progress as STATUS=, RELOADING=1
        then READY=1 around a SIGHUP, and STOPPING=1 at the stop."""
        import socket as sockets
        path = os.path.join(self.tmp, "notify")
        sock = sockets.socket(sockets.AF_UNIX, sockets.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(20)
        self.addCleanup(sock.close)
        agent = subprocess.Popen([BIN, "record", "--db", self.db, "--interval", "200ms",
                                  "--no-collector.gpu", "--health-interval", "0s"],
                                 env={**os.environ, "NOTIFY_SOCKET": path}, stderr=subprocess.PIPE, text=True)
        got = []
        try:
            def until(pred, after=0):
                while not any(pred(m) for m in got[after:]):
                    got.append(sock.recv(4096).decode())
                return next(i for i in range(after, len(got)) if pred(got[i]))
            until(lambda m: m == "READY=1")
            until(lambda m: m.startswith("STATUS=recording: "))
            agent.send_signal(signal.SIGHUP)
            reloading = until(lambda m: m.startswith("RELOADING=1\nMONOTONIC_USEC="))
            until(lambda m: m == "READY=1", reloading)
        finally:
            agent.send_signal(signal.SIGTERM)
            _, err = agent.communicate(timeout=30)
        while True:
            try:
                sock.settimeout(0.5)
                got.append(sock.recv(4096).decode())
            except OSError:
                break
        self.assertEqual(agent.returncode, 0, err)
        self.assertIn("STOPPING=1", got)
        status = next(m for m in got if m.startswith("STATUS="))
        self.assertRegex(status, r"^STATUS=recording: \d+ jobs?, \d+ incidents? open, \d+ intervals? written \(\d+ dropped")
        self.assertEqual(got.index("READY=1"), min(i for i, m in enumerate(got) if m == "READY=1"))
        reloading = next(i for i, m in enumerate(got) if m.startswith("RELOADING=1"))
        self.assertIn("READY=1", got[reloading + 1:], got)
        self.assertLess(got.index("READY=1"), reloading)
        self.assertGreater(got.index("STOPPING=1"), reloading)

    def test_fixture_root(self):
        """The recorder on a captured tree whose diskstats the test advances: exact awaits."""
        root = os.path.join(self.tmp, "root")
        shutil.copytree(os.path.join(FIXTURES, "host-6.18-loop-stack"), root)
        stats_path = os.path.join(root, "proc", "diskstats")
        with open(stats_path) as f:
            original = f.read()
        stop = threading.Event()

        def advance():
            # loop1 gains 10 reads costing 30 ms (r_await 3.0) and 5 writes costing 5 ms
            # (w_await 1.0) per step, whatever the timing; written atomically by rename.
            step = 0
            while not stop.is_set():
                step += 1
                lines = []
                for line in original.splitlines():
                    f = line.split()
                    if f[2] == "loop1":
                        f[3] = str(int(f[3]) + 10 * step)
                        f[6] = str(int(f[6]) + 30 * step)
                        f[7] = str(int(f[7]) + 5 * step)
                        f[10] = str(int(f[10]) + 5 * step)
                    lines.append(" ".join(f))
                tmp = stats_path + ".new"
                with open(tmp, "w") as out:
                    out.write("\n".join(lines) + "\n")
                os.rename(tmp, stats_path)
                time.sleep(0.02)

        writer = threading.Thread(target=advance)
        writer.start()
        try:
            result = subprocess.run(
                [BIN, "record", "--root", root, "--db", self.db, "--interval", "200ms",
                 "--duration", "2s", "--no-collector.gpu"],
                capture_output=True, text=True, timeout=30)
        finally:
            stop.set()
            writer.join()
        self.assertEqual(result.returncode, 0, result.stderr)
        counts = rows_per_device(self.db)
        self.assertEqual(set(counts), diskstats_names(stats_path))
        for name, n in counts.items():
            self.assertEqual(n, 10, f"{name}: {n} rows for 10 intervals")
        with sqlite3.connect(self.db) as db:
            awaits = db.execute(
                "SELECT r_await_ms, w_await_ms FROM disk_latency WHERE device = 'loop1'").fetchall()
            idle = db.execute(
                "SELECT count(*) FROM disk_latency WHERE device = 'vda' AND r_await_ms IS NULL"
            ).fetchone()[0]
            loop1 = db.execute(
                "SELECT kind, backing_device, physical FROM block_devices WHERE name = 'loop1'"
            ).fetchone()
            pressure_rows = db.execute("SELECT count(*) FROM pressure_samples").fetchone()[0]
        measured = [a for a in awaits if a[0] is not None]
        self.assertGreaterEqual(len(measured), 8, awaits)
        for r_await, w_await in measured:
            self.assertAlmostEqual(r_await, 3.0, places=6)
            self.assertAlmostEqual(w_await, 1.0, places=6)
        self.assertEqual(idle, 10, "an idle device's await must be NULL, not 0")
        # Never used since boot (loop2..7, zram0 in this capture): no rows at all.
        self.assertNotIn("loop2", counts)
        self.assertNotIn("zram0", counts)
        self.assertEqual(loop1, ("loop", "loop0", "vda"))
        self.assertEqual(pressure_rows, 30)  # io, cpu, memory x 10 intervals

    def test_nfs_mount_in_fixture_root(self):
        """The recorder on a captured tree with an NFS mount whose mountstats the test advances
        (node_exporter's real capture, READ counters moved on each step): the mount is a storage
        target named by its server, with nfsiostat's figures, exact whatever the timing."""
        root = os.path.join(self.tmp, "root")
        shutil.copytree(os.path.join(FIXTURES, "host-6.18-loop-stack"), root)
        with open(os.path.join(root, "proc", "self", "mountinfo"), "a") as f:
            f.write("194 21 0:42 / /mnt/nfs/test rw shared:144 - nfs4 192.168.1.1:/srv/test "
                    "rw,vers=4.0,proto=tcp\n")
        with open(os.path.join(FIXTURES, "procfs", "node_exporter", "proc", "10", "mountstats")) as f:
            original = f.read()
        stats_path = os.path.join(root, "proc", "self", "mountstats")
        stop = threading.Event()

        def advance():
            # Each step: 100 READs of 64 KiB that took 850 ms to execute, 800 ms of it on the
            # wire, and 4 retransmissions: r_await 8.5 ms, RTT 8.0 ms per interval.
            step = 0
            while not stop.is_set():
                step += 1
                first_read = True
                lines = []
                for line in original.splitlines():
                    f = line.split()
                    if first_read and f[:1] == ["READ:"]:
                        first_read = False  # only /mnt/nfs/test's, the first block
                        n = [int(x) for x in f[1:]]
                        n[0] += 100 * step
                        n[1] += 104 * step
                        n[4] += 100 * 65536 * step
                        n[6] += 800 * step
                        n[7] += 850 * step
                        line = "\t        READ: " + " ".join(map(str, n))
                    lines.append(line)
                tmp = stats_path + ".new"
                with open(tmp, "w") as out:
                    out.write("\n".join(lines) + "\n")
                os.rename(tmp, stats_path)
                time.sleep(0.02)

        writer = threading.Thread(target=advance)
        writer.start()
        try:
            result = subprocess.run(
                [BIN, "record", "--root", root, "--db", self.db, "--interval", "200ms",
                 "--duration", "2s", "--no-collector.gpu"],
                capture_output=True, text=True, timeout=30)
        finally:
            stop.set()
            writer.join()
        self.assertEqual(result.returncode, 0, result.stderr)
        with sqlite3.connect(self.db) as db:
            served = db.execute("SELECT kind, served_by, major, minor FROM block_devices "
                                "WHERE name = '/mnt/nfs/test'").fetchall()
            self.assertEqual(served, [("nfs", "nfs4 server 192.168.1.1:/srv/test", 0, 42)])
            rows = db.execute(
                "SELECT d.r_await_ms, d.w_await_ms, n.read_rtt_ms, n.retransmissions_per_second "
                "* d.interval_ms / 1000.0, d.reads_per_second * d.interval_ms / 1000.0 "
                "FROM disk_samples d JOIN nfs_samples n USING (device_id, ts_ms) "
                "JOIN block_devices b USING (device_id) WHERE b.name = '/mnt/nfs/test'").fetchall()
        self.assertGreaterEqual(len(rows), 8, rows)
        for r_await, w_await, rtt, retrans, reads in rows:
            self.assertAlmostEqual(r_await, 8.5)
            self.assertIsNone(w_await)  # no WRITE completed
            self.assertAlmostEqual(rtt, 8.0)
            self.assertAlmostEqual(retrans / reads, 0.04, places=6)
        listing = subprocess.run([BIN, "devices", "--root", root], capture_output=True, text=True)
        self.assertRegex(listing.stdout, r"/mnt/nfs/test\s+0:42\s+nfs\b.*nfs4 server 192\.168\.1\.1:/srv/test")

    def test_options_from_a_config_file(self):
        """Options come from a TOML file's [record] section, the secret in a webhook URL stays
        out of the process's command line, and a key that names no option is refused."""
        config = os.path.join(self.tmp, "stallwatch.toml")
        with open(config, "w") as f:
            f.write(f'[record]\ndb = "{self.db}"\ninterval = "200ms"\nduration = "2s"\n'
                    'webhook = "http://user:s3cr3t-token@127.0.0.1:9/hook"\n')
        agent = subprocess.Popen([BIN, "record", "--config", config, "--no-collector.gpu"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        with open(f"/proc/{agent.pid}/cmdline", "rb") as f:
            cmdline = f.read().decode()
        _, err = agent.communicate(timeout=30)
        self.assertEqual(agent.returncode, 0, err)
        self.assertNotIn("s3cr3t", cmdline)
        self.assertNotIn("s3cr3t", err)  # the agent's own log does not print it either
        with sqlite3.connect(self.db) as db:
            ticks = db.execute("SELECT count(DISTINCT ts_ms) FROM pressure_samples").fetchone()[0]
        self.assertGreaterEqual(ticks, 8, "2 s at 200 ms from the file, not the 1 s default")
        with open(config, "a") as f:
            f.write("intervall = 5\n")
        bad = subprocess.run([BIN, "record", "--config", config], capture_output=True, text=True,
                             timeout=30)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("record.intervall", bad.stdout + bad.stderr)

    def test_sighup_reloads_and_never_stops(self):
        """SIGHUP reads the config file again (hook, webhook, log level) and the agent records on;
        a file broken meanwhile keeps the settings in force. Before, SIGHUP stopped the agent."""
        config = os.path.join(self.tmp, "stallwatch.toml")
        with open(config, "w") as f:
            f.write('[record]\ninterval = "200ms"\n')
        agent = subprocess.Popen([BIN, "record", "--config", config, "--db", self.db, "--no-collector.gpu",
                                  "--socket", os.path.join(self.tmp, "dl.sock")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        with open(config, "w") as f:
            f.write('log-level = "warn"\n[record]\ninterval = "200ms"\non-incident = ["/bin/true"]\n'
                    'stall-close-after = "20s"\n')
        agent.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        self.assertIsNone(agent.poll(), "SIGHUP stopped the agent")
        with open(config, "w") as f:
            f.write("[record\n")  # broken
        agent.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        self.assertIsNone(agent.poll(), "a broken file stopped the agent")
        with sqlite3.connect(self.db) as db:
            before = db.execute("SELECT count(DISTINCT ts_ms) FROM pressure_samples").fetchone()[0]
        time.sleep(1.0)
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=30)
        self.assertEqual(agent.returncode, 0, err)
        self.assertIn("reload: hook on, webhook off, incidents open after 3 s and close after 20 s", err)
        self.assertIn("reload:", err.split("reload: hook on")[1])  # the broken file, said
        self.assertIn("the settings in force are kept", err)
        # log-level = "warn" from the file: the info lines at the stop are gone.
        self.assertNotIn("recorded ", err)
        with sqlite3.connect(self.db) as db:
            after = db.execute("SELECT count(DISTINCT ts_ms) FROM pressure_samples").fetchone()[0]
            runs = db.execute("SELECT count(*) FROM runs").fetchone()[0]
        self.assertGreater(after, before, "sampling went on after the reloads")
        self.assertEqual(runs, 1)

    def test_live_host(self):
        """`record --duration 3s` on this host: one row per second for every device."""
        result = subprocess.run([BIN, "record", "--db", self.db, "--duration", "3s"],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        counts = rows_per_device(self.db)
        expected = diskstats_names("/proc/diskstats")
        self.assertTrue(expected, "this host lists no block devices")
        self.assertTrue(expected <= set(counts), f"missing: {expected - set(counts)}")
        for name in expected:
            self.assertEqual(counts[name], 3, name)
        with sqlite3.connect(self.db) as db:
            intervals = [r[0] for r in db.execute("SELECT DISTINCT interval_ms FROM disk_samples")]
            ended = db.execute("SELECT ended_ms, started_ms FROM runs").fetchone()
        for ms in intervals:
            self.assertAlmostEqual(ms, 1000, delta=100)
        self.assertIsNotNone(ended[0])
        self.assertGreaterEqual(ended[0] - ended[1], 3000)

    def test_host_cpu_from_the_root_cgroup(self):
        """On this host's root cgroup (v2): the busy time from its cpu.stat once ten ticks went
        by without steal, /proc/stat every tenth tick; a busy loop shows as a core busy, and the
        I/O wait of those ticks is unknown (NULL), not 0."""
        mount = next((line.split()[4] for line in open("/proc/self/mountinfo")
                      if " - cgroup2 " in line and line.split()[3] == "/"), None)
        if not mount or not os.path.exists(os.path.join(mount, "cpu.stat")) \
                or os.path.exists(os.path.join(mount, "cgroup.type")):
            self.skipTest("no root cgroup v2 with cpu.stat here")
        proc = subprocess.Popen([BIN, "record", "--db", self.db, "--interval", "500ms",
                                 "--duration", "9s", "--no-collector.gpu", "--log-level", "info"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(5.5)
        burn_from = time.time()
        burner = subprocess.Popen([sys.executable, "-c",
                                   "import time\nend = time.time() + 3\nwhile time.time() < end: pass"])
        burner.wait(timeout=10)
        burn_to = time.time()
        _, err = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, err)
        used = re.search(r"cpu: busy time from the root cgroup's cpu.stat at (\d+) ticks, "
                         r"from /proc/stat at (\d+)", err)
        self.assertIsNotNone(used, err)
        if int(used.group(1)) == 0:
            self.skipTest("this host's CPUs counted steal the whole run: " + used.group(0))
        with sqlite3.connect(self.db) as db:
            rows = db.execute("SELECT ts_ms, busy_cores, iowait_cores, online_cpus "
                              "FROM cpu_samples ORDER BY ts_ms").fetchall()
        online = os.cpu_count()
        self.assertTrue(all(r[3] == online for r in rows), rows)
        self.assertTrue(all(0 <= r[1] <= online for r in rows), rows)
        # The ticks from cpu.stat have no I/O wait; the first ones, from /proc/stat, have one.
        self.assertEqual(sum(1 for r in rows if r[2] is None), int(used.group(1)), rows)
        self.assertIsNotNone(rows[0][2], rows)
        burning = [r[1] for r in rows if burn_from + 0.6 <= r[0] / 1000 <= burn_to]
        self.assertTrue(burning, rows)
        self.assertTrue(all(b >= 0.85 for b in burning), (burning, rows))

    def _interrupt(self, sig):
        proc = subprocess.Popen([BIN, "record", "--db", self.db, "--interval", "500ms",
                                 "--no-collector.gpu"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.3)
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.fail(f"stallwatch did not stop within 5 s of signal {sig}")
        self.assertEqual(proc.returncode, 0, err)
        with sqlite3.connect(self.db) as db:
            ended = db.execute("SELECT ended_ms FROM runs").fetchone()[0]
            rows = db.execute("SELECT count(DISTINCT ts_ms) FROM disk_samples").fetchone()[0]
        self.assertIsNotNone(ended, "the run was not closed")
        recorded = re.search(r"recorded (\d+) intervals", err)
        self.assertIsNotNone(recorded, err)
        self.assertGreaterEqual(int(recorded.group(1)), 2)
        self.assertEqual(rows, int(recorded.group(1)),
                         "every interval before the signal must be in the DB")

    def test_clean_shutdown(self):
        """SIGTERM and SIGINT stop the recorder promptly with everything flushed."""
        self._interrupt(signal.SIGTERM)
        os.remove(self.db)
        self._interrupt(signal.SIGINT)

    def test_bad_arguments(self):
        cases = [
            (["record", "--interval", "soon"], 2, "--interval"),
            (["record", "--duration", "-5s"], 2, "--duration"),
            (["record", "--db", "/proc/no-such-dir/sw.db", "--duration", "1s"], 2, "/proc/no-such-dir"),
            # Every usage error exits 2, as a Unix tool's does (CLI11's own were 104-114).
            (["record", "--no-such-flag"], 2, "no-such-flag"),
            ([], 2, "subcommand"),
        ]
        for args, code, needle in cases:
            result = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=10)
            self.assertEqual(result.returncode, code, (args, result.stderr))
            self.assertIn(needle, result.stderr + result.stdout, args)
        # A DB from a newer stallwatch is left alone: an error, not moved aside (a corrupt one
        # is moved aside: tests/test_faults_e2e.py).
        newer = os.path.join(self.tmp, "newer.db")
        c = sqlite3.connect(newer)
        c.execute("PRAGMA user_version = 99")
        c.close()
        result = subprocess.run([BIN, "record", "--db", newer, "--duration", "1s"],
                                capture_output=True, text=True, timeout=10)
        self.assertEqual(result.returncode, 1)
        self.assertIn("newer than this stallwatch understands", result.stderr + result.stdout)
        self.assertFalse([f for f in os.listdir(self.tmp) if ".corrupt-" in f])
        for args in (["--help"], ["record", "--help"], ["devices", "--help"], ["--version"]):
            result = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=10)
            self.assertEqual(result.returncode, 0, args)

    def test_pid_job(self):
        """--pid: the job's workers are tracked and the device its open files live on named."""
        data_dir = tempfile.mkdtemp(prefix="stallwatch-job-", dir=os.path.dirname(os.path.abspath(BIN)))
        script = (
            "import multiprocessing as mp, os, sys, time\n"
            "def worker(path):\n"
            "    with open(path, 'rb') as f:\n"
            "        time.sleep(4)\n"
            "if __name__ == '__main__':\n"
            "    paths = []\n"
            "    for i in range(2):\n"
            "        p = os.path.join(sys.argv[1], f'shard{i}.bin')\n"
            "        open(p, 'wb').write(b'x' * 4096)\n"
            "        paths.append(p)\n"
            "    ps = [mp.Process(target=worker, args=(p,)) for p in paths]\n"
            "    [p.start() for p in ps]\n"
            "    [p.join() for p in ps]\n")
        job = subprocess.Popen([sys.executable, "-c", script, data_dir])
        try:
            time.sleep(0.8)  # the workers are up and hold their files
            result = subprocess.run(
                [BIN, "record", "--db", self.db, "--pid", str(job.pid), "--interval", "500ms",
                 "--duration", "2s", "--no-collector.gpu", "--socket", os.path.join(self.tmp, "s.sock")],
                capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
        finally:
            job.wait(timeout=30)
            shutil.rmtree(data_dir, ignore_errors=True)
        listing = swjson.loads(subprocess.run([BIN, "jobs", "--db", self.db, "--json"],
                                            capture_output=True, text=True, check=True).stdout)
        self.assertEqual(len(listing), 1, listing)
        self.assertEqual(listing[0]["root_pid"], job.pid)
        self.assertGreaterEqual(listing[0]["workers"], 2)  # the two workers (and any helper)
        # The device holding data_dir, as `stallwatch devices` sees the mounts.
        devices = swjson.loads(subprocess.run([BIN, "devices", "--json"], capture_output=True,
                                            text=True, check=True).stdout)["block_devices"]
        best, best_len = None, -1
        for d in devices:
            for m in d["mounts"]:
                mp = m["mount_point"]
                if (data_dir == mp or data_dir.startswith(mp.rstrip("/") + "/")) and len(mp) > best_len:
                    best, best_len = d["name"], len(mp)
        if best is None:
            self.skipTest(f"{data_dir} is on no block device here")
        self.assertIn(best, [d["device"] for d in listing[0]["devices"]], listing[0])

    def test_mount_during_recording(self):
        """A loop device attached and mounted while recording shows in the DB within a tick."""
        if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
            self.skipTest("needs root, losetup and mkfs.ext4")
        image = os.path.join(self.tmp, "disk.img")
        mount_point = os.path.join(self.tmp, "mnt")
        os.mkdir(mount_point)
        subprocess.run(["truncate", "-s", "32M", image], check=True)
        proc = subprocess.Popen([BIN, "record", "--db", self.db, "--interval", "200ms",
                                 "--no-collector.gpu", "--no-collector.jobs"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        loop = None
        try:
            time.sleep(0.5)
            made = subprocess.run(["losetup", "-f", "--show", image], capture_output=True, text=True)
            if made.returncode != 0:
                self.skipTest("no loop device: " + made.stderr.strip())
            loop = made.stdout.strip()
            subprocess.run(["mkfs.ext4", "-q", loop], check=True)
            subprocess.run(["mount", loop, mount_point], check=True)
            time.sleep(1.0)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=10)
            if loop:
                subprocess.run(["umount", mount_point])
                subprocess.run(["losetup", "-d", loop])
        self.assertEqual(proc.returncode, 0, err)
        name = os.path.basename(loop)
        with sqlite3.connect(self.db) as db:
            row = db.execute("SELECT d.backing_file, m.mount_point FROM block_devices d "
                             "JOIN mounts m USING (device_id) WHERE d.name = ?", (name,)).fetchone()
        self.assertEqual(row, (image, mount_point))

    def test_devices_listing(self):
        root = os.path.join(FIXTURES, "host-6.18-loop-stack")
        result = subprocess.run([BIN, "devices", "--root", root, "--json"],
                                capture_output=True, text=True, timeout=10)
        self.assertEqual(result.returncode, 0, result.stderr)
        devices = {d["name"]: d for d in swjson.loads(result.stdout)["block_devices"]}
        self.assertEqual(devices["loop1"]["backing_device"], "loop0")
        self.assertEqual(devices["loop1"]["physical"], ["vda"])
        self.assertEqual(devices["loop0"]["mounts"][0]["mount_point"], "/mnt/swdata")
        self.assertEqual(devices["vda"]["mounts"][0]["mount_point"], "/")
        live = subprocess.run([BIN, "devices"], capture_output=True, text=True, timeout=10)
        self.assertEqual(live.returncode, 0, live.stderr)
        for name in os.listdir("/sys/block"):
            self.assertIn(name, live.stdout)
        self.assertIn("GPUs:", live.stdout)


if __name__ == "__main__":
    unittest.main()
