#!/usr/bin/env python3
"""Compares stallwatch's per-interval disk figures with `iostat -x 1` (sysstat) on one device
over the same ten one-second intervals, while fio loads the device.

Usage (root): bench/compare_iostat.py [--device loopN] [--stallwatch build/stallwatch]
Without --device it makes a 512 MiB image under /var/tmp, attaches it as a loop device with
direct I/O (so the reads reach the disk underneath), and removes it afterwards.
Agreement: r_await, w_await and aqu-sz within 5 % or 0.05 ms (0.05 for aqu-sz)."""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

TOLERANCE_RATIO = 0.05
TOLERANCE_ABS = 0.05
INTERVALS = 10


def agree(a, b):
    if a is None or b is None:
        return a is None and (b is None or b == 0.0)  # iostat prints 0.00 where we store NULL
    return abs(a - b) <= max(TOLERANCE_ABS, TOLERANCE_RATIO * max(abs(a), abs(b)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", help="block device name (default: a fresh loop device)")
    ap.add_argument("--stallwatch", default=os.path.join(os.path.dirname(__file__), "..", "build", "stallwatch"))
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="stallwatch-iostat-")
    image = None
    device = args.device
    if device is None:
        image = os.path.join("/var/tmp", f"stallwatch-iostat-{os.getpid()}.img")
        subprocess.run(["truncate", "-s", "512M", image], check=True)
        loop = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", image],
                              check=True, capture_output=True, text=True).stdout.strip()
        device = os.path.basename(loop)
    db = os.path.join(tmp, "sw.db")
    fio = None
    try:
        fio = subprocess.Popen(
            ["fio", "--name=load", f"--filename=/dev/{device}", "--rw=randrw", "--rwmixread=70",
             "--bs=4k", "--iodepth=16", "--ioengine=libaio", "--direct=1", "--time_based",
             f"--runtime={INTERVALS + 8}", "--size=400M", "--output-format=terse"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)  # past fio's ramp-up
        # Start both together: iostat reads at once; stallwatch's priming read follows its
        # DB open within milliseconds, so the intervals line up to a few ms.
        iostat = subprocess.Popen(["iostat", "-x", "-d", "-y", "-o", "JSON", "1", str(INTERVALS), device],
                                  stdout=subprocess.PIPE, text=True)
        sw = subprocess.run([args.stallwatch, "record", "--db", db, "--interval", "1s",
                             "--duration", f"{INTERVALS}s", "--no-collector.gpu",
                             "--no-collector.pressure", "--log-level", "warn"],
                            capture_output=True, text=True)
        out, _ = iostat.communicate(timeout=30)
        if sw.returncode != 0:
            sys.exit(f"stallwatch failed: {sw.stderr}")
    finally:
        if fio:
            fio.terminate()
            fio.wait()
        if image:
            subprocess.run(["losetup", "-d", f"/dev/{device}"])
            os.remove(image)

    reports = json.loads(out)["sysstat"]["hosts"][0]["statistics"]
    iostat_rows = []
    for r in reports:
        d = next(x for x in r["disk"] if x["disk_device"] == device)
        iostat_rows.append((d["r_await"], d["w_await"], d["aqu-sz"], d["r/s"], d["w/s"]))
    with sqlite3.connect(db) as conn:
        sw_rows = conn.execute(
            "SELECT r_await_ms, w_await_ms, aqu_sz, reads_per_second, writes_per_second "
            "FROM disk_latency WHERE device = ? ORDER BY ts_ms", (device,)).fetchall()

    print(f"device {device}: {len(iostat_rows)} iostat intervals, {len(sw_rows)} stallwatch intervals")
    print(f"{'#':>2} {'r_await iostat':>14} {'stallwatch':>10} {'w_await iostat':>14} {'stallwatch':>10} "
          f"{'aqu-sz iostat':>13} {'stallwatch':>10} {'r/s iostat':>10} {'stallwatch':>10}  agree")
    failures = 0
    for i, (io, sw_row) in enumerate(zip(iostat_rows, sw_rows), 1):
        ok = agree(sw_row[0], io[0]) and agree(sw_row[1], io[1]) and agree(sw_row[2], io[2])
        failures += not ok
        fmt = lambda v: "NULL" if v is None else f"{v:.3f}"
        print(f"{i:>2} {io[0]:>14.3f} {fmt(sw_row[0]):>10} {io[1]:>14.3f} {fmt(sw_row[1]):>10} "
              f"{io[2]:>13.3f} {fmt(sw_row[2]):>10} {io[3]:>10.1f} {sw_row[3]:>10.1f}  {'yes' if ok else 'NO'}")
    if len(iostat_rows) != INTERVALS or len(sw_rows) != INTERVALS:
        print("interval counts differ")
        failures += 1
    print(f"{INTERVALS - failures}/{INTERVALS} intervals agree within 5 % or 0.05 ms")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
