"""Every I/O's latency through eBPF (issue 33), for real: fio reading a loop device from a
followed job's cgroup while a neighbour reads the same device from another; the agent's
per-I/O percentiles against fio's own, the job's I/O told from the neighbour's, and the
collector's fallback where BPF is not allowed. Root, a kernel with BTF."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import socket
import time
import unittest
import urllib.request

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")


def cgroup2_mount():
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on hybrid hosts)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class IoLatencyE2E(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: BPF, a loop device and cgroups")
        if not os.path.exists("/sys/kernel/btf/vmlinux"):
            self.skipTest("the kernel has no BTF")
        self.cgroup_root = cgroup2_mount()
        if not self.cgroup_root:
            self.skipTest("no cgroup v2 hierarchy mounted")
        self.tmp = tempfile.mkdtemp(prefix="stallwatch-iolat-")
        self.procs, self.loop, self.cgroups = [], None, []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        for cg in reversed(self.cgroups):
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, args, cgroup=None, **kw):
        if cgroup:  # the process moves itself into CGROUP before it starts ARGS
            args = ["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", *args]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        return p

    def make_loop(self):
        image = os.path.join(self.tmp, "disk.img")
        with open(image, "wb") as f:
            f.write(os.urandom(64 << 20))
        self.loop = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", image],
                                   capture_output=True, text=True, check=True).stdout.strip()
        return self.loop

    def make_cgroup(self, name):
        path = os.path.join(self.cgroup_root, f"stallwatch-iolat-{os.getpid()}-{name}")
        os.mkdir(path)
        self.cgroups.append(path)
        return path

    def test_the_jobs_reads_against_fio_and_a_neighbours(self):
        loop = self.make_loop()
        job_cg, other_cg = self.make_cgroup("job"), self.make_cgroup("other")
        db = os.path.join(self.tmp, "sw.db")
        # The job exists (a process in its cgroup) before its reads start.
        self.start(["sleep", "60"], cgroup=job_cg)
        port = free_port()
        agent = self.start([BIN, "record", "--db", db, "--interval", "500ms", "--no-collector.gpu",
                            "--listen", f"127.0.0.1:{port}",
                            "--collector.io_latency", "--health-interval", "0s",
                            "--socket", os.path.join(self.tmp, "dl.sock"), "--cgroup", job_cg])
        time.sleep(1.5)
        out = os.path.join(self.tmp, "fio.json")
        fio = self.start(["fio", "--name=job", f"--filename={loop}", "--rw=randread", "--bs=4k",
                          "--direct=1", "--ioengine=libaio", "--iodepth=8", "--runtime=4",
                          "--time_based", "--output-format=json", f"--output={out}"], cgroup=job_cg)
        neighbour = self.start(["dd", f"if={loop}", "of=/dev/null", "bs=64k", "iflag=direct",
                                "count=300"], cgroup=other_cg)
        self.assertEqual(fio.wait(timeout=60), 0, fio.stderr.read())
        neighbour.wait(timeout=60)
        time.sleep(1.2)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        agent.terminate()
        _, err = agent.communicate(timeout=20)
        self.assertEqual(agent.returncode, 0, err)
        self.assertNotIn(b"cannot load the eBPF program", err)
        fio_read = json.load(open(out))["jobs"][0]["read"]
        fio_ios = fio_read["total_ios"]
        fio_p50 = fio_read["clat_ns"]["percentile"]["50.000000"] / 1e6
        dev = os.path.basename(loop)
        with sqlite3.connect(db) as c:
            rows = dict((bool(r[0]), (r[1], r[2])) for r in c.execute(
                "SELECT l.job_id IS NOT NULL, sum(l.count), group_concat(l.slots) FROM io_latency_samples l "
                "JOIN block_devices d USING (device_id) WHERE d.name = ? AND l.op = 'read' "
                "GROUP BY 1", (dev,)))
        self.assertIn(True, rows, "no read was the job's")
        self.assertIn(False, rows, "no read was the neighbour's")
        job_count = rows[True][0]
        # Every read fio made, counted as the job's (within the first interval's priming).
        self.assertGreater(job_count, 0.8 * fio_ios)
        self.assertLessEqual(job_count, fio_ios * 1.01 + 10)
        self.assertGreaterEqual(rows[False][0], 250)  # the neighbour's 300 reads of 64 KiB
        report = json.loads(subprocess.run([BIN, "report", "--db", db, "--json"], capture_output=True,
                                           check=True).stdout)
        lat = [d for r in report for d in r.get("io_latency", []) if d["device"] == dev and d["op"] == "read"]
        self.assertTrue(lat, report)
        job_p50 = lat[0]["job"]["p50_ms"]
        # The block layer's view against fio's, which adds its own submission and reaping: on a
        # loaded 2-core machine that is up to a fifth (docs/MEASUREMENTS.md has the idle figures).
        self.assertLess(abs(job_p50 - fio_p50), 0.35 * fio_p50, (job_p50, fio_p50))
        self.assertLessEqual(job_p50, fio_p50 * 1.1)
        text = subprocess.run([BIN, "report", "--db", db], capture_output=True, text=True, check=True).stdout
        self.assertRegex(text, rf"{dev} +read .*I/Os  p50 [0-9.]+  p99 [0-9.]+  p99\.9 [0-9.]+ ms")
        self.assertRegex(text, r"the job's \d+ I/Os: p50 .*; others' \d+: p50")
        # /metrics: a histogram per device and operation that promtool accepts.
        dev_re = dev.replace(".", r"\.")
        self.assertRegex(page, rf'stallwatch_io_latency_seconds_bucket{{device="{dev_re}",op="read",le="0.001"}} \d+')
        count = [l for l in page.splitlines() if l.startswith(f'stallwatch_io_latency_seconds_count{{device="{dev}",op="read"}}')]
        self.assertTrue(count)
        self.assertGreaterEqual(float(count[0].split()[-1]), job_count)
        check = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True)
        self.assertNotIn("error", (check.stdout + check.stderr).lower(), check)
        print(f"\n{dev} reads at QD8: fio clat p50 {fio_p50:.3f} ms, the agent's {job_p50:.3f} ms", file=sys.stderr)

    def test_without_the_rights_it_says_so_once_and_records_the_rest(self):
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        os.chmod(self.tmp, 0o755)
        db = os.path.join(shared, "sw.db")
        r = subprocess.run(["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups", BIN, "record",
                            "--db", db, "--duration", "2s", "--no-collector.gpu", "--collector.io_latency",
                            "--health-interval", "0s", "--socket", os.path.join(shared, "dl.sock")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("cannot load the eBPF program"), 1, r.stderr)
        self.assertIn("needs root, or CAP_BPF with CAP_PERFMON", r.stderr)
        with sqlite3.connect(db) as c:
            self.assertGreater(c.execute("SELECT count(*) FROM disk_samples").fetchone()[0], 0)
            self.assertEqual(c.execute("SELECT count(*) FROM io_latency_samples").fetchone()[0], 0)


if __name__ == "__main__":
    unittest.main()
