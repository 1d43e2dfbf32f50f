"""Replays issue 31's and issue 32's real runs (one H100, tests/gpu/limiter_runs.sh and
stall_runs.sh / ddp_runs.sh) and checks the verdicts against what was injected and against the
jobs' own step logs.

Issue 31 (h100-limiter/): the same ResNet-50 job with its input varied one knob at a time, each
with and without the dataloader hook. Each run gets its limiter; its input-wait share agrees with
the job's own step log (within a point with the hook; without it, a few points under: the sampled
main thread misses the CPU it spends receiving a batch); its predicted speed-up agrees with the
speed-up measured when the next configuration removed the limit, or with the job fed from memory.

Issue 32 (h100-explain/): a limit on the job's parent cgroup, workers stopped, a FUSE daemon that
stops answering, a checkpoint to a write-limited disk, a stall 10 s after the first step, and two
DDP ranks sharing one GPU with one rank's reads limited, no hook: each verdict explains itself,
names its device, and the live page (replayed) comes as soon as the evidence allows.

Issue 33 (h100-iolatency/, tests/gpu/io_latency_runs.sh, on a host whose io controller is
cgroup v2's): a job reporting through the hook reads a loop device while io.max limits its reads
and a neighbour cgroup reads the same device: the verdict tells the job's per-I/O latency from
the neighbour's."""

import json
import swjson
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

from gpu.limiter_check import pace, steps_of

BIN = os.environ.get("STALLWATCH_BIN", "../build/stallwatch")
RECORDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "recordings")


def copied(test, directory, run):
    tmp = tempfile.mkdtemp(prefix="stallwatch-limiter-")
    test.addCleanup(shutil.rmtree, tmp, True)
    db = os.path.join(tmp, "run.db")
    shutil.copy(os.path.join(RECORDINGS, directory, f"{run}.db"), db)
    return db


def report(db):
    return swjson.loads(subprocess.run([BIN, "--log-level", "off", "report", "--db", db, "--json"],
                                     capture_output=True, text=True, check=True).stdout)


class LimiterRecordings(unittest.TestCase):
    directory = "h100-limiter"

    def verdict(self, run):
        r = report(copied(self, self.directory, run))
        self.assertEqual(len(r), 1)
        v = r[0]["limiter"]
        own = pace(steps_of(os.path.join(RECORDINGS, self.directory, f"{run}.steps")),
                   v["start_ms"] / 1000, v["end_ms"] / 1000)
        self.assertIsNotNone(own, "the step log covers the span judged")
        return v, own

    def check(self, run, limiter, hook_tolerance=0.01, sampled_tolerance=0.055):
        v, own = self.verdict(run)
        self.assertEqual(v["limiter"], limiter, v)
        hook = not run.endswith("-nohook")
        self.assertEqual(v["wait_source"], "hook" if hook else "main_thread_sampled")
        diff = v["input_wait_share"] - own["wait_share"]
        if hook:
            self.assertLessEqual(abs(diff), hook_tolerance, (v["input_wait_share"], own["wait_share"]))
        else:
            # Under the job's own account by the CPU it spends receiving a batch, never over.
            self.assertLessEqual(diff, 0.01, (v["input_wait_share"], own["wait_share"]))
            self.assertGreaterEqual(diff, -sampled_tolerance, (v["input_wait_share"], own["wait_share"]))
        if limiter == "gpu":
            self.assertEqual(v["advice"], [])
        return v, own

    def speedup(self, run, reference, tolerance=0.2):
        """The predicted speed-up against the one measured in REFERENCE (its steps per second)."""
        v, own = self.verdict(run)
        _, ref = self.verdict(reference)
        measured = ref["steps_per_s"] / own["steps_per_s"]
        self.assertLessEqual(abs(v["speedup"] / measured - 1), tolerance,
                             f"{run}: predicted {v['speedup']:.2f}x, measured {measured:.2f}x in {reference}")

    def test_fed_from_memory_is_gpu_bound(self):
        self.check("gpu", "gpu")
        self.check("gpu-nohook", "gpu")

    def test_enough_workers_are_gpu_bound(self):
        for run in ("w4", "w8", "w16", "nodecode"):
            self.check(run, "gpu")
            self.check(run + "-nohook", "gpu")

    def test_two_workers_are_input_cpu_with_the_speed_up_on_offer(self):
        v, _ = self.check("w2", "input-cpu")
        self.assertTrue(any(a["text"].startswith("more DataLoader workers") and a["kind"] == "more-workers"
                            for a in v["advice"]), v["advice"])
        self.assertTrue(any(a["text"].startswith("faster decoding") and a["kind"] == "faster-decoding"
                            for a in v["advice"]), v["advice"])
        self.check("w2-nohook", "input-cpu")
        # Against the job fed from memory (input keeping up entirely) and, without the hook,
        # against 4 workers (with it, 4 workers still left the loader's own 12 % wait: 1.25x).
        self.speedup("w2", "gpu")
        self.speedup("w2-nohook", "gpu")
        self.speedup("w2-nohook", "w4-nohook")

    def test_a_read_limit_is_io_throttled_and_named(self):
        for run in ("limited", "limited-nohook"):
            v, _ = self.check(run, "io-throttled", sampled_tolerance=0.03)
            self.assertEqual(v["device"], "loop0")
            self.assertIn("io.max 7:0 (loop0) rbps=20.0 MiB/s", v["limit"])
            # The job's reads in the limit's own unit (issue 44: "20.7 MB/s" beside
            # "rbps=20.0 MiB/s" before): 20.0 MiB/s is the limit, to the tenth.
            advice = next(a["text"] for a in v["advice"] if a["kind"] == "raise-read-limit")
            self.assertRegex(advice, r"\((1\d|20)\.\d MiB/s against 20\.0 MiB/s\)$")
            self.assertNotIn("MB/s", advice)
        self.speedup("limited", "nodecode")
        self.speedup("limited-nohook", "nodecode-nohook")

    def test_a_remote_fetch_per_sample_wants_more_workers(self):
        v, _ = self.check("fetch", "input-workers")
        self.assertTrue(v["advice"][0]["text"].startswith("more DataLoader workers"), v["advice"])
        self.check("fetch-nohook", "input-workers")
        self.speedup("fetch", "gpu")
        # Without the hook the prediction (3.8x) falls short of the 5.0x measured: that run's
        # own steps took 38 ms of GPU-side time against 28 ms in its hook twin (docs/MEASUREMENTS.md).
        self.speedup("fetch-nohook", "gpu", tolerance=0.3)

    def test_a_slow_fuse_store_is_input_storage_and_named(self):
        for run in ("fusestore", "fusestore-nohook"):
            v, _ = self.check(run, "input-storage")
            self.assertTrue(v["device"].endswith("/slow"), v)
            self.assertFalse(v["device_at_limit"])
        self.speedup("fusestore", "gpu")
        self.speedup("fusestore-nohook", "nodecode-nohook")

    def test_a_main_thread_busy_outside_the_gpu_is_host(self):
        for run in ("host", "host-nohook"):
            v, _ = self.check(run, "host")
            self.assertTrue(v["advice"][0]["text"].startswith("the main thread ran"), v["advice"])
            self.assertEqual(v["advice"][0]["kind"], "move-main-thread-work")


def replay_events(db, *options):
    out = subprocess.run([BIN, "--log-level", "off", "replay", "--db", db, *options],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return [json.loads(line) for line in out.splitlines()]


class ExplainRecordings(unittest.TestCase):
    directory = "h100-explain"

    def incident(self, run):
        db = copied(self, self.directory, run)
        r = report(db)
        self.assertEqual(len(r), 1)
        self.assertEqual(len(r[0]["incidents"]), 1, r[0]["incidents"])
        with open(os.path.join(RECORDINGS, self.directory, f"{run}.window")) as f:
            window = [int(x) for x in f.read().split()[:2]]
        return r[0]["incidents"][0], window, db

    def signal(self, inc, prefix):
        return next((e for e in inc["evidence"] if e["signal"].startswith(prefix)), None)

    def test_a_limit_on_the_parent_cgroup_is_named_with_its_level(self):
        inc, (t_in, _), db = self.incident("parentlimit")
        self.assertEqual((inc["class"], inc["device"], inc["physical_device"]), ("io-throttled", "loop0", "vda"))
        e = self.signal(inc, "job_cgroup_read_bytes_per_s at io.max 7:0 (loop0) rbps=15.0 MiB/s in ")
        self.assertIsNotNone(e, inc["evidence"])
        self.assertTrue(e["signal"].endswith("(parent of the job's cgroup)"), e["signal"])
        self.assertTrue(e["supports"])
        self.assertLessEqual(abs(inc["start_ms"] - t_in), 2000)
        # Live: the page names the device too, within 2 s of the stall's start.
        opened = [e for e in replay_events(db) if e["event"] == "open"]
        self.assertEqual([(e["class"], e["device"]) for e in opened], [("io-throttled", "loop0")])
        self.assertLessEqual(opened[0]["ts_ms"] - opened[0]["start_ms"], 2000)

    def test_stopped_workers_are_a_hang_that_says_so(self):
        inc, (t_in, t_out), db = self.incident("stopped")
        self.assertEqual(inc["class"], "not-storage")
        stopped = self.signal(inc, "job_processes_stopped")
        self.assertTrue(stopped["supports"])
        self.assertEqual(stopped["during"], 8)  # its 8 DataLoader workers
        waited = self.signal(inc, "main_process_asleep in ")
        self.assertIsNotNone(waited, inc["evidence"])
        text = subprocess.run([BIN, "report", "--db", db], capture_output=True, text=True, check=True).stdout
        self.assertIn("hang: 8 of the job's processes stopped (T) for 15 s; the main process waited in", text)
        # Not held as a job winding down: paged after the usual 3 s.
        opened = [e for e in replay_events(db) if e["event"] == "open"]
        self.assertEqual(len(opened), 1)
        self.assertLessEqual(opened[0]["ts_ms"] - opened[0]["start_ms"], 4000)

    def test_a_fuse_daemon_that_stops_answering_names_the_mount_and_its_daemon(self):
        inc, (t_in, _), db = self.incident("fusehang")
        self.assertEqual(inc["class"], "disk-slow")
        self.assertTrue(inc["device"].endswith("/slow"), inc)
        self.assertTrue(self.signal(inc, "aqu_sz " + inc["device"])["supports"])
        text = subprocess.run([BIN, "report", "--db", db], capture_output=True, text=True, check=True).stdout
        self.assertRegex(text, r"/slow is fuse: FUSE daemon swslowfs \(pid \d+\)")

    def test_a_checkpoint_held_by_its_disks_write_limit_says_so(self):
        inc, _, db = self.incident("ckptslow")
        self.assertEqual((inc["class"], inc["device"], inc["physical_device"]), ("checkpoint", "loop1", "vda"))
        held = self.signal(inc, "checkpoint_held_by io.max 7:1 (loop1) wbps=40.0 MiB/s")
        self.assertTrue(held and held["supports"], inc["evidence"])
        # The disk the job writes is not "a disk the job does not read".
        self.assertFalse(any("loop1 (the job does not read it)" in e["signal"] for e in inc["evidence"]))
        text = subprocess.run([BIN, "report", "--db", db], capture_output=True, text=True, check=True).stdout
        self.assertIn("the checkpoint was held by its write limit, io.max 7:1 (loop1) wbps=40.0 MiB/s", text)

    def test_a_stall_ten_seconds_after_the_first_step_is_found_at_its_start(self):
        inc, (t_in, t_out), _ = self.incident("early")
        self.assertEqual((inc["class"], inc["device"]), ("io-throttled", "loop0"))
        self.assertLessEqual(abs(inc["start_ms"] - t_in), 2000)
        self.assertLessEqual(abs(inc["end_ms"] - t_out), 2000)

    def test_a_rank_limited_alone_on_a_shared_gpu_is_the_straggler_without_the_hook(self):
        inc, (t_in, _), db = self.incident("sharedgpu-rank-disk")
        self.assertEqual(inc["straggler"]["rank"], 1, inc)
        self.assertEqual(inc["waiting_ranks"], [0])
        self.assertTrue(self.signal(inc, "d_state_threads rank 1")["supports"])
        opened = [e for e in replay_events(db) if e["event"] == "open"]
        self.assertEqual(len(opened), 1)
        self.assertEqual(opened[0]["straggler"]["rank"], 1)
        self.assertLessEqual(opened[0]["ts_ms"] - opened[0]["start_ms"], 2000)
        healthy = report(copied(self, self.directory, "sharedgpu-healthy"))
        self.assertEqual(healthy[0]["incidents"], [])
        self.assertEqual(replay_events(copied(self, self.directory, "sharedgpu-healthy")), [])


if __name__ == "__main__":
    unittest.main()


class IoLatencyRecordings(unittest.TestCase):
    def test_a_limited_job_beside_a_neighbour_is_told_from_it(self):
        db = copied(self, "h100-iolatency", "neighbour")
        with open(os.path.join(RECORDINGS, "h100-iolatency", "neighbour.window")) as f:
            t_in, t_out = (int(x) for x in f.read().split()[:2])
        r = report(db)
        self.assertEqual(len(r), 1)
        self.assertEqual(len(r[0]["incidents"]), 1, r[0]["incidents"])
        inc = r[0]["incidents"][0]
        self.assertEqual((inc["class"], inc["device"]), ("io-throttled", "loop1"))
        self.assertLessEqual(abs(inc["start_ms"] - t_in), 2000)
        self.assertLessEqual(abs(inc["end_ms"] - t_out), 2000)
        evidence = {e["signal"]: e for e in inc["evidence"]}
        self.assertTrue(evidence["job_cgroup_read_bytes_per_s at io.max 7:1 (loop1) rbps=1.0 MiB/s in "
                                 "/sys/fs/cgroup/swjob"]["supports"])
        # The limit held the job's reads before the device: each of them was as fast as before,
        # while a neighbour made nearly all of the device's reads.
        own = evidence["read_p99_ms loop1 (the job's I/Os)"]
        self.assertFalse(own["supports"])
        self.assertLess(own["during"], 1.0)
        share = evidence["others_share_of_reads loop1"]
        self.assertTrue(share["supports"])
        self.assertGreater(share["during"], 0.9)
        self.assertLess(share["baseline"], 0.1)
        text = subprocess.run([BIN, "--log-level", "off", "report", "--db", db], capture_output=True,
                              text=True, check=True).stdout
        self.assertRegex(text, r"loop1: the job's reads p99 0\.\d+ ms \(before: 0\.\d+\), others' 0\.\d+ "
                               r"ms \(before: 0\.\d+\); others made 99 % of its reads \(before: 0 %\)")
        # The reads the limit held back were started by a kernel thread; they are still the
        # job's: 256 a second, its 1 MiB/s limit in 4 KiB reads.
        with sqlite3.connect(db) as c:
            counts = [n for (n,) in c.execute(
                "SELECT l.count FROM io_latency_samples l JOIN block_devices d USING (device_id) "
                "WHERE d.name = 'loop1' AND l.op = 'read' AND l.job_id IS NOT NULL AND l.ts_ms "
                "BETWEEN ? AND ?", (t_in + 2000, t_out - 1000))]
        self.assertGreater(len(counts), 8)
        self.assertTrue(all(abs(n - 256) <= 2 for n in counts), counts)
