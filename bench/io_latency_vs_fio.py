#!/usr/bin/env python3
"""The eBPF collector's per-I/O percentiles against fio's own, side by side (issue 33).

A 256 MiB image on a loop device with direct I/O (its reads reach the disk under it), read at
random by fio at queue depths 1, 8 and 64 (RUN_S seconds each) from a cgroup the agent follows
(--cgroup), with `stallwatch record --collector.io_latency` at 1 s. For each depth: fio's
completion-latency p50/p99/p99.9 against the agent's for the job's reads of the loop device
over the same seconds, from the DB's histograms. Root; prints a Markdown table.

With SLOW_MS, the image lives on swslowfs (tests/fuse/swslowfs.cpp; SWSLOWFS_BIN, default
build/tests/swslowfs) whose every read waits SLOW_MS: a device whose own time dominates, so
that fio's submission and reaping in user space, which the block layer does not see, weigh
little in the comparison.

Usage: bench/io_latency_vs_fio.py BUILD/stallwatch [RUN_S (default 8)] [SLOW_MS]
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
RUN_S = int(sys.argv[2]) if len(sys.argv) > 2 else 8
SLOW_MS = int(sys.argv[3]) if len(sys.argv) > 3 else 0
SLOWFS = os.environ.get("SWSLOWFS_BIN", "build/tests/swslowfs")


def slot_bounds(s):
    if s < 8:
        return s, s + 1
    msb, sub = s // 8 + 2, s % 8
    return (8 + sub) << (msb - 3), (9 + sub) << (msb - 3)


def quantile_ms(slots, q):
    n = sum(slots.values())
    target, below = q * n, 0
    for s in sorted(slots):
        c = slots[s]
        if below + c >= target:
            lo, hi = slot_bounds(s)
            return (lo + (target - below) / c * (hi - lo)) / 1000
        below += c
    return None


def cgroup2_mount():
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        if f[f.index("-") + 1] == "cgroup2":
            return f[4]


tmp = tempfile.mkdtemp(prefix="stallwatch-iolat-bench-")
image = os.path.join(tmp, "disk.img")
with open(image, "wb") as f:
    f.write(os.urandom(256 << 20))
mounted = None
if SLOW_MS:
    mounted = os.path.join(tmp, "slowfs")
    os.mkdir(mounted)
    with open(os.path.join(tmp, "delay_ms"), "w") as f:
        f.write(f"{SLOW_MS}\n")
    subprocess.run([SLOWFS, tmp, mounted, "--delay-file", os.path.join(tmp, "delay_ms")], check=True)
    image = os.path.join(mounted, "disk.img")
loop = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", "-r", image], capture_output=True,
                      text=True, check=True).stdout.strip()
cg = os.path.join(cgroup2_mount(), f"stallwatch-iolat-bench-{os.getpid()}")
os.mkdir(cg)
db = os.path.join(tmp, "sw.db")
holder = subprocess.Popen(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec sleep 3600'])
agent = subprocess.Popen([BIN, "record", "--db", db, "--interval", "1s", "--no-collector.gpu",
                          "--collector.io_latency", "--health-interval", "0s", "--socket",
                          os.path.join(tmp, "dl.sock"), "--cgroup", cg], stderr=subprocess.DEVNULL)
rows = []
try:
    time.sleep(2.5)
    for qd in (1, 8, 64):
        out = os.path.join(tmp, f"fio-{qd}.json")
        t0 = time.time()
        subprocess.run(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", "fio", "--name=r",
                        f"--filename={loop}", "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                        f"--iodepth={qd}", f"--runtime={RUN_S}", "--time_based", "--output-format=json",
                        f"--output={out}"], check=True)
        t1 = time.time()
        time.sleep(1.5)
        clat = json.load(open(out))["jobs"][0]["read"]["clat_ns"]["percentile"]
        rows.append((qd, t0, t1, [clat[k] / 1e6 for k in ("50.000000", "99.000000", "99.900000")]))
finally:
    agent.terminate()
    agent.wait()
    holder.kill()
    holder.wait()
    time.sleep(0.3)
    os.rmdir(cg)
    subprocess.run(["losetup", "-d", loop])
    if mounted:
        time.sleep(0.3)
        subprocess.run(["umount", "-l", mounted])

dev = os.path.basename(loop)
c = sqlite3.connect(db)
print(f"{dev}: " + (f"an image on swslowfs, every read {SLOW_MS} ms" if SLOW_MS else "an image on this disk") +
      f", {RUN_S} s per depth")
print(f"| QD | fio p50 / p99 / p99.9 (ms) | stallwatch p50 / p99 / p99.9 (ms) | ratio p50 / p99 | I/Os |")
print("|---|---|---|---|---|")
for qd, t0, t1, fio in rows:
    slots = {}
    n = 0
    # Whole intervals inside fio's run: each row covers the second before its ts_ms.
    for count, text in c.execute(
            "SELECT l.count, l.slots FROM io_latency_samples l JOIN block_devices d USING (device_id) "
            "WHERE d.name = ? AND l.op = 'read' AND l.job_id IS NOT NULL AND l.ts_ms - l.interval_ms >= ? "
            "AND l.ts_ms <= ?", (dev, int(t0 * 1000), int(t1 * 1000))):
        n += count
        for pair in text.split(","):
            s, k = pair.split(":")
            slots[int(s)] = slots.get(int(s), 0) + int(k)
    ours = [quantile_ms(slots, q) for q in (0.5, 0.99, 0.999)]
    print(f"| {qd} | {fio[0]:.3f} / {fio[1]:.3f} / {fio[2]:.3f} | {ours[0]:.3f} / {ours[1]:.3f} / {ours[2]:.3f} "
          f"| {ours[0] / fio[0]:.2f} / {ours[1] / fio[1]:.2f} | {n} |")
shutil.rmtree(tmp, ignore_errors=True)
