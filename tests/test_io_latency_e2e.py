"""Every I/O's latency through eBPF (issue 33), for real: fio reading a loop device from a
followed job's cgroup while a neighbour reads the same device from another; the agent's
per-I/O percentiles against fio's own, the job's I/O told from the neighbour's; a tail that the
interval average hides (one read in 64 held 100 ms by a FUSE filesystem under a loop device)
under a job reporting through the hook, named disk-slow by the tail; and the collector's
fallback where BPF is not allowed. Root, a kernel with BTF."""

import json
import swjson
import os
import re
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
# Random 4 KiB O_DIRECT reads of DEVICE for SECONDS; prints how many.
READER = r"""
import mmap, os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
blocks, buf, n = os.lseek(fd, 0, os.SEEK_END) // 4096, mmap.mmap(-1, 4096), 0
end = time.time() + float(sys.argv[2])
while time.time() < end:
    os.preadv(fd, [buf], random.randrange(blocks) * 4096)
    n += 1
print(n)
"""
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SLOWFS = os.environ.get("SWSLOWFS_BIN", "../build/tests/swslowfs")
PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")

# A job whose input is many small reads, reporting through the hook (its docstring says how).
TAIL_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "io_latency_job.py")


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
        self.procs, self.loop, self.cgroups, self.mounts = [], None, [], []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        if self.mounts:  # the job's ext4 first, then swslowfs (after its loop device is gone)
            subprocess.run(["umount", "-l", self.mounts[0]], capture_output=True)
        for cg in reversed(self.cgroups):
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        for m in self.mounts[1:]:
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, args, cgroup=None, **kw):
        if cgroup:  # the process moves itself into CGROUP (or each of a list) before it starts ARGS
            moves = " && ".join(f"echo $$ > {c}/cgroup.procs" for c in
                                (cgroup if isinstance(cgroup, list) else [cgroup]))
            args = ["sh", "-c", f'{moves} && exec "$@"', "sh", *args]
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

    def wait_for_collector_run(self, port, collector, timeout=30):
        prefix = f'stallwatch_collector_runs_total{{collector="{collector}"'
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                if sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
                       if line.startswith(prefix)) >= 1:
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.1)
        self.fail(f"the {collector} collector did not run within {timeout} s")

    def test_a_queue_without_io_statistics_is_timed_from_the_issue(self):
        # Once the kernel's start times have agreed with the clock, a request without one (its
        # queue's I/O statistics off: /sys/block/DEV/queue/iostats 0) is timed from its issue,
        # not from 0 nor dropped.
        loop = self.make_loop()
        iostats = f"/sys/block/{os.path.basename(loop)}/queue/iostats"
        self.addCleanup(lambda: open(iostats, "w").write("1"))  # also if the test fails midway
        db = os.path.join(self.tmp, "sw.db")
        port = free_port()
        # On by default (issue 47): no flag.
        agent = self.start([BIN, "record", "--db", db, "--interval", "500ms", "--no-collector.gpu",
                            "--listen", f"127.0.0.1:{port}",
                            "--health-interval", "0s", "--socket", os.path.join(self.tmp, "dl.sock")])
        self.wait_for_collector_run(port, "io_latency")
        read = ["fio", "--name=r", f"--filename={loop}", "--rw=randread", "--bs=4k", "--direct=1",
                "--ioengine=psync", "--runtime=2", "--time_based", "--output-format=json"]
        self.assertEqual(subprocess.run(read, capture_output=True).returncode, 0)
        # The check's tick, then ten more without a job (StartTracing) before on_io_start is
        # detached: the reads below are timed by one program.
        time.sleep(6.5)
        with open(iostats, "w") as f:
            f.write("0")
        since_ms = int(time.time() * 1000)
        out = subprocess.run(read, capture_output=True, text=True, check=True).stdout
        fio_ios = json.loads(out)["jobs"][0]["read"]["total_ios"]
        with open(iostats, "w") as f:  # at once: another test may attach this loop device next
            f.write("1")
        time.sleep(1.2)
        agent.terminate()
        _, err = agent.communicate(timeout=20)
        self.assertEqual(agent.returncode, 0, err)
        kernels = b"start times the kernel's" in err
        if kernels:
            # No job followed: once the kernel's stamps were agreed, on_io_start was detached
            # and on_complete alone timed each request (issue 47).
            self.assertIn(b"one program a request from now on", err)
            self.assertRegex(err, rb"one program a request \(starts not traced\) at exit")
        with sqlite3.connect(db) as c:
            rows = c.execute(
                "SELECT l.ts_ms, l.count, l.mean_ms, l.service_mean_ms FROM io_latency_samples l "
                "JOIN block_devices d USING (device_id) WHERE d.name = ? AND l.op = 'read' AND l.ts_ms > ?",
                (os.path.basename(loop), since_ms)).fetchall()
        # Every read since the switch counted (the intervals that end after it)...
        self.assertGreater(sum(r[1] for r in rows), 0.8 * fio_ios)
        self.assertLessEqual(sum(r[1] for r in rows), fio_ios * 1.01 + 10)
        # ... and those wholly after it (500 ms intervals) timed from the issue.
        after = [r[1:] for r in rows if r[0] > since_ms + 600]
        self.assertTrue(after)
        for count, mean, service in after:
            self.assertGreater(mean, 0)
            self.assertLess(mean, 1000)  # not timed from 0 (the boot)
            if kernels:
                self.assertAlmostEqual(mean, service, places=9)  # from the issue
            else:
                self.assertGreaterEqual(mean, service)

    @staticmethod
    def expected_mode(cgroup, memory_mirror=False):
        """How the agent tells the requests of a job in CGROUP, as it says at exit (issue 47);
        MEMORY_MIRROR: its processes are in a v1 memory cgroup at the same path (hybrid host)."""
        controllers = open(os.path.join(cgroup, "cgroup.controllers")).read().split()
        if "io" in controllers:
            return rb"one program a request \(starts not traced\) at exit"
        if "memory" in controllers or memory_mirror:
            return rb"one program a request \(starts not traced, owners from pages\) at exit"
        return rb"each request's start traced at exit"

    @staticmethod
    def memory_v1_mount():
        """Where a cgroup v1 memory hierarchy is mounted (a hybrid host), or None."""
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                sep = fields.index("-")
                if fields[sep + 1] == "cgroup" and "memory" in fields[sep + 3].split(","):
                    return fields[4]
        return None

    def test_a_job_without_the_io_controller_is_told_by_its_pages(self):
        """A job in a cgroup whose parent enabled memory but not io (a login session's scope, a
        launcher's unit: systemd's defaults), or on a hybrid host in a v2 cgroup without
        controllers and a v1 memory cgroup that mirrors it (as systemd keeps them): its bios
        name another cgroup, its pages its own. One program a request still tells its reads from
        a neighbour's, every one of them."""
        with open(os.path.join(self.cgroup_root, "cgroup.subtree_control")) as f:
            v2_memory = "memory" in f.read().split()
        memory_v1 = self.memory_v1_mount()
        if v2_memory:
            parent = self.make_cgroup("session")
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                f.write("+memory")
            job_cg = os.path.join(parent, "job")
            os.mkdir(job_cg)
            self.cgroups.append(job_cg)
            job_cgroups = [job_cg]
            self.assertIn("memory", open(os.path.join(job_cg, "cgroup.controllers")).read().split())
        elif memory_v1:
            job_cg = self.make_cgroup("job")
            mirror = os.path.join(memory_v1, os.path.relpath(job_cg, self.cgroup_root))
            os.mkdir(mirror)
            self.cgroups.append(mirror)
            job_cgroups = [job_cg, mirror]
        else:
            self.skipTest("no memory controller in either hierarchy")
        self.assertNotIn("io", open(os.path.join(job_cg, "cgroup.controllers")).read().split())
        other_cg = self.make_cgroup("neighbour")
        loop = self.make_loop()
        db = os.path.join(self.tmp, "sw.db")
        self.start(["sleep", "60"], cgroup=job_cgroups)
        port = free_port()
        agent = self.start([BIN, "record", "--db", db, "--interval", "500ms", "--no-collector.gpu",
                            "--listen", f"127.0.0.1:{port}", "--health-interval", "0s",
                            "--socket", os.path.join(self.tmp, "dl.sock"), "--cgroup", job_cg])
        self.wait_for_collector_run(port, "io_latency")
        # A second of reads settles the start times (the kernel's stamps against the clock),
        # then ten ticks without need leave the start's program: the reads after are timed by
        # the completion's alone.
        reads = [self.start([sys.executable, "-c", READER, loop, "1"], cgroup=job_cgroups)]
        reads[0].wait(timeout=30)
        time.sleep(6.5)
        reads.append(self.start([sys.executable, "-c", READER, loop, "4"], cgroup=job_cgroups))
        neighbour = self.start(["dd", f"if={loop}", "of=/dev/null", "bs=64k", "iflag=direct",
                                "count=300"], cgroup=other_cg)
        job_reads = sum(int(r.communicate(timeout=60)[0]) for r in reads)
        neighbour.wait(timeout=60)
        time.sleep(1.2)
        agent.terminate()
        _, err = agent.communicate(timeout=20)
        self.assertEqual(agent.returncode, 0, err)
        self.assertRegex(err, self.expected_mode(job_cg, memory_mirror=len(job_cgroups) > 1))
        self.assertIn(b"one program a request from now on", err)
        with sqlite3.connect(db) as c:
            rows = dict((bool(r[0]), r[1]) for r in c.execute(
                "SELECT l.job_id IS NOT NULL, sum(l.count) FROM io_latency_samples l "
                "JOIN block_devices d USING (device_id) WHERE d.name = ? AND l.op = 'read' "
                "GROUP BY 1", (os.path.basename(loop),)))
        # Every read of the job's, counted as its own (the first interval's are priming), and
        # none of the neighbour's 300.
        self.assertGreater(rows.get(True, 0), 0.9 * job_reads, (rows, job_reads))
        self.assertLessEqual(rows.get(True, 0), job_reads + 10, (rows, job_reads))
        self.assertGreaterEqual(rows.get(False, 0), 250, rows)
        self.assertLessEqual(rows.get(False, 0), 300 + 10, rows)
        print(f"\njob told by its pages: {rows.get(True, 0)} of its {job_reads} reads, "
              f"{rows.get(False, 0)} others'", file=sys.stderr)

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
        # The reads start once the collector has run (its program attached): a fixed 1.5 s was
        # too short for the sanitized agent beside other tests, and the neighbour's 300 reads
        # were over before it looked.
        self.wait_for_collector_run(port, "io_latency")
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
        # Where the start times came from is said; fio's 4 s of reads are thousands of requests,
        # enough for the check (on this kernel they come from the kernel: the p50 below holds
        # either way).
        self.assertRegex(err, rb"start times (the kernel's|from the programs' clock) \(\d+ of \d+ compared")
        # The job's cgroup without the io controller (a hybrid host's v2 tree; one whose parent
        # did not enable it): a request's bio would name another cgroup, so its first page's
        # memory cgroup tells it where the cgroup has memory, else each start stays traced; with
        # io, the bio serves.
        self.assertRegex(err, self.expected_mode(job_cg))
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
        report = swjson.loads(subprocess.run([BIN, "report", "--db", db, "--json"], capture_output=True,
                                           check=True).stdout)
        lat = [d for r in report for d in r.get("io_latency", []) if d["device"] == dev and d["op"] == "read"]
        self.assertTrue(lat, report)
        job_p50 = lat[0]["job"]["p50_ms"]
        # The block layer's view against fio's, which adds its own submission and reaping: on a
        # loaded 2-core machine that is up to a fifth, and was 35 % with four sanitized tests
        # beside it (0.156 against 0.241 ms); docs/MEASUREMENTS.md has the idle figures. The
        # bounds catch a wrong unit or slot (a factor of 2 or 1000), not the machine's load.
        self.assertGreater(job_p50, 0.5 * fio_p50, (job_p50, fio_p50))
        self.assertLessEqual(job_p50, fio_p50 * 1.1)
        # A slice of the recording for a post-mortem elsewhere keeps the job's per-I/O figures
        # and everyone else's.
        job = next(r for r in report if r.get("io_latency"))
        sliced = os.path.join(self.tmp, "slice.db")
        subprocess.run([BIN, "export", "--db", db, "--job", str(job["job_id"]), "-o", sliced],
                       capture_output=True, check=True)
        again = swjson.loads(subprocess.run([BIN, "report", "--db", sliced, "--json"],
                                          capture_output=True, check=True).stdout)
        self.assertEqual(again[0]["io_latency"], job["io_latency"])
        text = subprocess.run([BIN, "report", "--db", db], capture_output=True, text=True, check=True).stdout
        self.assertRegex(text, rf"{dev} +read .*I/Os  p50 [0-9.]+  p99 [0-9.]+  p99\.9 [0-9.]+ ms")
        self.assertRegex(text, r"the job's \d+ I/Os: p50 .*; others' \d+: p50")
        # /metrics: a histogram per device and operation that promtool accepts.
        dev_re = dev.replace(".", r"\.")
        self.assertRegex(page, rf'stallwatch_io_latency_seconds_bucket{{device="{dev_re}",op="read",le="0.001"}} \d+')
        count = [l for l in page.splitlines() if l.startswith(f'stallwatch_io_latency_seconds_count{{device="{dev}",op="read"}}')]
        self.assertTrue(count)
        self.assertGreaterEqual(float(count[0].split()[-1]), job_count)
        # The job's own I/O in a family of its own, labelled with the job while it runs.
        own = re.search(rf'^stallwatch_job_io_latency_seconds_count{{training_job="[^"]+",device="{dev_re}",'
                        rf'op="read"}} (\d+)$', page, re.M)
        self.assertTrue(own, page[-3000:])
        self.assertGreater(float(own.group(1)), 0.8 * job_count)
        self.assertLessEqual(float(own.group(1)), job_count)
        check = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True)
        self.assertNotIn("error", (check.stdout + check.stderr).lower(), check)
        print(f"\n{dev} reads at QD8: fio clat p50 {fio_p50:.3f} ms, the agent's {job_p50:.3f} ms", file=sys.stderr)

    def test_a_tail_the_average_hides_is_named_disk_slow(self):
        if not os.path.exists("/dev/fuse"):
            self.skipTest("needs /dev/fuse")
        src, mnt, data = (os.path.join(self.tmp, n) for n in ("src", "slowfs", "data"))
        for d in (src, mnt, data):
            os.mkdir(d)
        delay = os.path.join(self.tmp, "delay_ms")
        with open(delay, "w") as f:
            f.write("0\n")
        # An ext4 image holding the job's data, on swslowfs, under a read-only loop device.
        image = os.path.join(src, "data.img")
        subprocess.run(["truncate", "-s", "96M", image], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
        subprocess.run(["mount", "-o", "loop", image, data], check=True)
        with open(os.path.join(data, "samples"), "wb") as f:
            f.write(os.urandom(64 << 20))
        subprocess.run(["umount", data], check=True)
        subprocess.run([SLOWFS, src, mnt, "--delay-file", delay, "-o", "fsname=swslowfs,subtype=swslowfs"],
                       check=True)
        self.mounts = [mnt]
        self.loop = subprocess.run(["losetup", "-f", "--show", "-r", "--direct-io=on", os.path.join(mnt, "data.img")],
                                   capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run(["mount", "-o", "ro,noload", self.loop, data], check=True)
        self.mounts.insert(0, data)
        job_cg = self.make_cgroup("tail")
        db, sock = os.path.join(self.tmp, "sw.db"), os.path.join(self.tmp, "dl.sock")
        agent = self.start([BIN, "record", "--db", db, "--no-collector.gpu", "--collector.io_latency",
                            "--health-interval", "0s", "--socket", sock])
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        env = dict(os.environ, PYTHONPATH=PACKAGE, STALLWATCH_SOCKET=sock)
        job = self.start([sys.executable, TAIL_JOB, "40", os.path.join(data, "samples")],
                         cgroup=job_cg, env=env)
        start = time.time()
        time.sleep(16)
        with open(delay, "w") as f:
            f.write("100 64\n")  # one read in 64 waits 100 ms: the mean moves by ~1.6 ms
        t0 = time.time()
        time.sleep(max(0, start + 30 - time.time()))
        with open(delay, "w") as f:
            f.write("0\n")
        t1 = time.time()
        _, job_err = job.communicate(timeout=90)
        self.assertEqual(job.returncode, 0, job_err)
        time.sleep(2)
        agent.terminate()
        _, err = agent.communicate(timeout=30)
        self.assertEqual(agent.returncode, 0, err)
        report = swjson.loads(subprocess.run([BIN, "report", "--db", db, "--json"], capture_output=True,
                                           check=True).stdout)
        text = subprocess.run([BIN, "report", "--db", db], capture_output=True, text=True,
                              check=True).stdout
        jobs = [j for j in report if j["progress_signal"] == "steps"]
        self.assertEqual(len(jobs), 1, text)
        incidents = jobs[0]["incidents"]
        self.assertEqual(len(incidents), 1, text)
        inc = incidents[0]
        dev = os.path.basename(self.loop)
        self.assertEqual(inc["class"], "disk-slow", text)
        self.assertEqual(inc["device"], dev, text)
        self.assertLess(abs(inc["start_ms"] - t0 * 1000), 2500, text)
        self.assertLess(abs(inc["end_ms"] - t1 * 1000), 2500, text)
        evidence = {e["signal"]: e for e in inc["evidence"]}
        tail = evidence[f"read_p99_ms {dev} (the job's I/Os)"]
        self.assertTrue(tail["supports"], text)
        self.assertGreater(tail["during"], 50, text)
        # The interval figures alone would not have named it: loop's await stayed under its
        # threshold (3x a baseline floored at 1 ms) and so did its queue. (Here the FUSE mount
        # under the loop device shows its own queue too, which a disk's firmware would not: the
        # class alone does not tell the tail rule from that. Without the tail rule, the same
        # stall on a disk is io-throttled: StallDetector.WithoutPerIoFigures... in the unit
        # tests.)
        self.assertFalse(evidence[f"await_ms {dev}"]["supports"], text)
        self.assertFalse(evidence[f"aqu_sz {dev}"]["supports"], text)
        self.assertRegex(text, rf"{dev}: the job's reads p99 \d+(\.\d+)? ms \(before: [0-9.]+\)")
        # The HTML timeline draws the tail in a lane of its own, the job's and others'.
        html = os.path.join(self.tmp, "report.html")
        subprocess.run([BIN, "report", "--db", db, "--html", html], capture_output=True, check=True)
        page = open(html).read()
        self.assertIn(f"p99 of each read on {dev}: the job's (solid), others' (dashed)", page)
        self.assertIn('data-series="series-read-tail"', page)
        print(f"\n{dev}: await {evidence[f'await_ms {dev}']['baseline']:.2f} -> "
              f"{evidence[f'await_ms {dev}']['during']:.2f} ms, the job's reads p99 "
              f"{tail['baseline']:.2f} -> {tail['during']:.1f} ms", file=sys.stderr)

    def test_the_units_capabilities_are_enough(self):
        """Root bounded to the systemd unit's CapabilityBoundingSet, nothing else (as systemd
        starts it): the agent follows another user's job (its /proc needs CAP_SYS_PTRACE) and
        records that job's every read (CAP_BPF, CAP_PERFMON)."""
        unit = os.path.join(REPO, "deploy", "systemd", "stallwatch.service.in")
        with open(unit) as f:
            line = next(l for l in f if l.startswith("CapabilityBoundingSet="))
        keep = {c.lower() for c in line.split("=", 1)[1].split()}
        bounding = next(l for l in subprocess.run(["capsh", "--print"], capture_output=True, text=True,
                                                  check=True).stdout.splitlines()
                        if l.startswith("Bounding set ="))
        held = set(bounding.split("=", 1)[1].split(","))
        self.assertTrue(keep <= held, f"this host's root lacks {keep - held}")
        loop = self.make_loop()
        os.chmod(loop, 0o666)  # the other user's job reads it
        job_cg = self.make_cgroup("caps")
        db = os.path.join(self.tmp, "sw.db")
        self.start(["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups", "sleep", "30"],
                   cgroup=job_cg)
        agent = self.start(["capsh", f"--drop={','.join(sorted(held - keep))}", "--", "-c",
                            f'exec "$0" record --db {db} --interval 500ms --no-collector.gpu '
                            f"--collector.io_latency --health-interval 0s --socket {self.tmp}/dl.sock "
                            f"--cgroup {job_cg}", BIN])
        time.sleep(1.5)
        # Random 4 KiB reads for 4 s as the other user: long enough to be seen (a process that
        # exits between two scans leaves no /proc figures behind).
        reader = self.start(["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups",
                             sys.executable, "-c", READER, loop, "4"], cgroup=job_cg)
        self.assertEqual(reader.wait(timeout=60), 0, reader.stderr.read())
        reads = int(reader.stdout.read())
        time.sleep(1.2)
        agent.terminate()
        _, err = agent.communicate(timeout=20)
        self.assertEqual(agent.returncode, 0, err)
        self.assertNotIn(b"cannot load the eBPF program", err)
        with sqlite3.connect(db) as c:
            job_reads = c.execute("SELECT coalesce(sum(l.count), 0) FROM io_latency_samples l JOIN "
                                  "block_devices d USING (device_id) WHERE d.name = ? AND "
                                  "l.job_id IS NOT NULL AND l.op = 'read'",
                                  (os.path.basename(loop),)).fetchone()[0]
            proc_io = c.execute("SELECT max(read_bytes_per_second) FROM job_samples").fetchone()[0]
        self.assertGreater(job_reads, 0.9 * reads)  # the first interval's priming aside
        self.assertLessEqual(job_reads, reads + 10)
        self.assertGreater(proc_io or 0, 0, "the other user's /proc/PID/io was not read")

    def test_without_the_rights_it_says_so_once_and_records_the_rest(self):
        # On by default (issue 47): a user without the rights is told once, nothing else changes.
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        os.chmod(self.tmp, 0o755)
        db = os.path.join(shared, "sw.db")
        r = subprocess.run(["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups", BIN, "record",
                            "--db", db, "--duration", "2s", "--no-collector.gpu",
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
