#!/usr/bin/env python3
"""Peak anonymous memory and wall time of `stallwatch report --db DIR --json` across nodes'
recordings, for one or several builds side by side, RUNS rounds of each in turn. RssAnon is
polled every 10 ms (the mapped recordings' file-backed pages are not counted: the kernel drops
them as it needs). Prints each run's figures and the verdict (node, rank, device) it gave.

Usage: bench/fleet_memory.py BIN[,BIN...] DIR [RUNS] [-- REPORT_ARGS...]
Make DIR with tests/synthetic_fleet.py (bench/fleet_day.sh says how); docs/MEASUREMENTS.md
quotes it on 64 nodes x 8 GPUs x 24 h."""
import json
import subprocess
import sys
import threading
import time


def run(binary, directory, extra):
    start = time.monotonic()
    p = subprocess.Popen([binary, "report", "--db", directory, "--json", *extra], stdout=subprocess.PIPE,
                         text=True)
    out = []
    reader = threading.Thread(target=lambda: out.append(p.stdout.read()))
    reader.start()
    peak = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.01)
    reader.join()
    wall = time.monotonic() - start
    if p.returncode != 0:
        return wall, peak / 1024, f"exit {p.returncode}"
    run = json.loads(out[0])["runs"][0]
    verdicts = [(i["straggler_node"], i["straggler"]["rank"] if i["straggler"] else None, i["device"])
                for i in run["incidents"]]
    return wall, peak / 1024, f"grid {run['interval_ms']} ms, {verdicts}"


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if len(args) < 2:
        sys.exit(__doc__)
    rounds = int(args[2]) if len(args) > 2 else 3
    for _ in range(rounds):
        for binary in args[0].split(","):
            wall, anon, what = run(binary, args[1], extra)
            print(f"{binary}: {wall:.2f} s wall, peak anonymous {anon:.0f} MiB, {what}", flush=True)


if __name__ == "__main__":
    main()
