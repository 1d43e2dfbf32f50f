#!/usr/bin/env python3
"""What --collector.io_latency costs each I/O (issue 33): fio 4 KiB random reads at QD1 on a
direct-I/O loop device, RUN_S seconds a round, alternating rounds with `stallwatch record`
running without the collector and with it (ROUNDS of each, side by side): the difference is the
eBPF program's cost in the kernel's I/O path, and the collector's own in user space. Prints each
round and the medians of IOPS and of fio's completion-latency p50. Root.

Usage: bench/io_latency_overhead.py BUILD/stallwatch [RUN_S (default 8)] [ROUNDS (default 3)]
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

tmp = tempfile.mkdtemp(prefix="stallwatch-iolat-cost-")
image = os.path.join(tmp, "disk.img")
with open(image, "wb") as f:
    f.write(os.urandom(256 << 20))
loop = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", image], capture_output=True,
                      text=True, check=True).stdout.strip()


def fio(name):
    out = os.path.join(tmp, f"{name}.json")
    subprocess.run(["fio", "--name=r", f"--filename={loop}", "--rw=randread", "--bs=4k", "--direct=1",
                    "--ioengine=psync", f"--runtime={RUN_S}", "--time_based", "--output-format=json",
                    f"--output={out}"], check=True)
    read = json.load(open(out))["jobs"][0]["read"]
    return read["iops"], read["clat_ns"]["percentile"]["50.000000"] / 1000


results = {"off": [], "on": []}
try:
    for k in range(ROUNDS):
        for mode in ("off", "on"):
            agent = subprocess.Popen([BIN, "record", "--db", os.path.join(tmp, f"sw{mode}{k}.db"),
                                      "--no-collector.gpu", "--health-interval", "0s", "--socket",
                                      os.path.join(tmp, f"dl{mode}{k}.sock")] +
                                     (["--collector.io_latency"] if mode == "on" else []),
                                     stderr=subprocess.DEVNULL)
            time.sleep(2)
            iops, p50 = fio(f"{mode}{k}")
            agent.terminate()
            agent.wait()
            results[mode].append((iops, p50))
            print(f"round {k} collector {mode:3s}: {iops:8.0f} IOPS, clat p50 {p50:6.1f} us", flush=True)
finally:
    subprocess.run(["losetup", "-d", loop])
    shutil.rmtree(tmp, ignore_errors=True)
off_iops = statistics.median(r[0] for r in results["off"])
on_iops = statistics.median(r[0] for r in results["on"])
off_p50 = statistics.median(r[1] for r in results["off"])
on_p50 = statistics.median(r[1] for r in results["on"])
print(f"median: {off_iops:.0f} -> {on_iops:.0f} IOPS ({on_iops / off_iops:.3f}x); clat p50 "
      f"{off_p50:.1f} -> {on_p50:.1f} us; {1e6 / on_iops - 1e6 / off_iops:+.2f} us an I/O")
