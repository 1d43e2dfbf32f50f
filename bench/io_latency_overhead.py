#!/usr/bin/env python3
"""What --collector.io_latency costs each I/O (issue 33): fio 4 KiB random reads at QD1 on a
direct-I/O loop device, RUN_S seconds a round, alternating rounds with `stallwatch record`
running without the collector and with it (ROUNDS of each, side by side): the difference is the
eBPF program's cost in the kernel's I/O path, and the collector's own in user space. Prints each
round and the medians of IOPS and of fio's completion-latency p50. Then one more round with the
kernel's BPF statistics on (kernel.bpf_stats_enabled=1): each program's own run time per run,
read with bpftool, and their sum per block request (the cost in the I/O path itself, without the
noise of fio's clock; the statistics add about 20 ns a run of their own). Root.

Usage: bench/io_latency_overhead.py BUILD/stallwatch [RUN_S (default 8)] [ROUNDS (default 3)]
                                    [BACKING (file, default, or shm)] [IODEPTH (default 1)]
(ROUNDS 0: the statistics round alone.) BACKING shm puts the loop device's file in /dev/shm
(tmpfs: no device under it, the most requests a second this machine can make); IODEPTH above 1
reads through io_uring at that depth: the programs' cost where the I/O path stays in the caches.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
RUN_S = int(sys.argv[2]) if len(sys.argv) > 2 else 8
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
BACKING = sys.argv[4] if len(sys.argv) > 4 else "file"
IODEPTH = int(sys.argv[5]) if len(sys.argv) > 5 else 1
ENGINE = ["--ioengine=psync"] if IODEPTH == 1 else ["--ioengine=io_uring", f"--iodepth={IODEPTH}"]

tmp = tempfile.mkdtemp(prefix="stallwatch-iolat-cost-", dir="/dev/shm" if BACKING == "shm" else None)
image = os.path.join(tmp, "disk.img")
with open(image, "wb") as f:
    f.write(os.urandom(256 << 20))
loop = subprocess.run(["losetup", "-f", "--show", f"--direct-io={'off' if BACKING == 'shm' else 'on'}", image], capture_output=True,
                      text=True, check=True).stdout.strip()


def fio(name):
    out = os.path.join(tmp, f"{name}.json")
    subprocess.run(["fio", "--name=r", f"--filename={loop}", "--rw=randread", "--bs=4k", "--direct=1",
                    *ENGINE, f"--runtime={RUN_S}", "--time_based", "--output-format=json",
                    f"--output={out}"], check=True)
    read = json.load(open(out))["jobs"][0]["read"]
    return read["iops"], read["clat_ns"]["percentile"]["50.000000"] / 1000


results = {"off": [], "on": []}
PROGRAMS = ("on_io_start", "on_issue", "on_requeue", "on_complete")


def bpf_programs():
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    return {p["name"]: p for p in json.loads(out.stdout) if p.get("name") in PROGRAMS}


def agent(mode, k):
    return subprocess.Popen([BIN, "record", "--db", os.path.join(tmp, f"sw{mode}{k}.db"),
                             "--no-collector.gpu", "--health-interval", "0s", "--socket",
                             os.path.join(tmp, f"dl{mode}{k}.sock")] +
                            # On by default since issue 47: off said, for the side by side.
                            (["--collector.io_latency"] if mode == "on" else ["--no-collector.io_latency"]),
                            stderr=subprocess.DEVNULL)


def settle():
    """A second of reads, then eleven ticks: the agent checks the kernel's start times against
    the programs' clock on the first thousand requests, then leaves the start's program after
    ten ticks without need (issue 47); what follows is measured with the settled programs."""
    subprocess.run(["fio", "--name=w", f"--filename={loop}", "--rw=randread", "--bs=4k", "--direct=1",
                    *ENGINE, "--runtime=1", "--time_based", "--output=/dev/null"], check=True)
    time.sleep(11.5)


try:
    for k in range(ROUNDS):
        for mode in ("off", "on"):
            running = agent(mode, k)
            time.sleep(2)
            settle()  # both modes alike
            iops, p50 = fio(f"{mode}{k}")
            running.terminate()
            running.wait()
            results[mode].append((iops, p50))
            print(f"round {k} collector {mode:3s}: {iops:8.0f} IOPS, clat p50 {p50:6.1f} us", flush=True)
    # The programs' own time, from the kernel's statistics.
    stats_file = "/proc/sys/kernel/bpf_stats_enabled"
    was = open(stats_file).read().strip()
    running = agent("on", "stats")
    try:
        time.sleep(2)
        settle()  # the statistics count the settled programs
        with open(stats_file, "w") as f:
            f.write("1")
        before = bpf_programs()
        iops, _ = fio("stats")
        after = bpf_programs()
    finally:
        with open(stats_file, "w") as f:
            f.write(was)
        running.terminate()
        running.wait()
    per_request = 0.0
    completions = 0
    for name in PROGRAMS:
        if name not in after:
            continue
        runs = after[name].get("run_cnt", 0) - before.get(name, {}).get("run_cnt", 0)
        ns = after[name].get("run_time_ns", 0) - before.get(name, {}).get("run_time_ns", 0)
        if name == "on_complete":
            completions = runs
        if runs:
            print(f"  {name:12s} {runs:9d} runs, {ns / runs:6.0f} ns a run")
    for name in PROGRAMS:
        if name in after and completions:
            ns = after[name].get("run_time_ns", 0) - before.get(name, {}).get("run_time_ns", 0)
            per_request += ns / completions
    if completions:
        print(f"in the kernel: {per_request:.0f} ns a block request ({completions / (iops * RUN_S):.2f} "
              f"requests a read of fio's: a loop device's reads are read again from its backing file)")
finally:
    subprocess.run(["losetup", "-d", loop])
    shutil.rmtree(tmp, ignore_errors=True)
if not ROUNDS:
    sys.exit(0)
off_iops = statistics.median(r[0] for r in results["off"])
on_iops = statistics.median(r[0] for r in results["on"])
off_p50 = statistics.median(r[1] for r in results["off"])
on_p50 = statistics.median(r[1] for r in results["on"])
print(f"median: {off_iops:.0f} -> {on_iops:.0f} IOPS ({on_iops / off_iops:.3f}x); clat p50 "
      f"{off_p50:.1f} -> {on_p50:.1f} us; {1e6 / on_iops - 1e6 / off_iops:+.2f} us an I/O")
