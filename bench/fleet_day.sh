#!/usr/bin/env bash
# Times `stallwatch report` across 16 nodes' recordings of one synchronous run: 8 GPUs (ranks)
# per node, 24 h of one-second samples each (tests/synthetic_fleet.py), node 11's local rank 5
# held back by a slow disk for 60 s in the middle. Prints the median of 5 runs, the peak RSS,
# and whether the report names the injected node, rank and device. Target (issue 14): at most
# 5 s. Usage: bench/fleet_day.sh [BUILD_DIR] [NODES] [SECONDS]
# (the recordings, ~3 GB, are made under /var/tmp and removed)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/stallwatch
nodes=${2:-16}; seconds=${3:-86400}
straggler=$((nodes > 11 ? 11 : nodes - 1))
dir=$(mktemp -d /var/tmp/stallwatch-fleet-XXXXXX)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s.%N)
python3 "$here/tests/synthetic_fleet.py" "$dir" --nodes "$nodes" --gpus 8 --seconds "$seconds" \
  --stall disk-slow --straggler "$straggler" --straggler-rank 5 --stall-at $((seconds / 2)) --stall-for 60 2> /dev/null
echo "generated in $(echo "$(date +%s.%N) - $start" | bc) s: $(du -sh "$dir" | cut -f1) in $nodes recordings," \
  "$(sqlite3 "$dir/node-00.db" 'SELECT count(*) FROM rank_samples') rank rows each"
times=$(for run in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$bin" report --db "$dir" --json > "$dir/out.json"
  echo "$(date +%s.%N) - $s" | bc
done)
echo "report across $nodes nodes: runs $(echo $times | tr '\n' ' ') s; median $(echo "$times" | sort -n | sed -n 3p) s"
/usr/bin/time -f "peak RSS %M KiB, %e s wall, %U s user, %S s system" "$bin" report --db "$dir" > "$dir/out.txt"
# Anonymous and file-backed (the recordings, memory-mapped) RSS apart: polled every 10 ms.
python3 - "$bin" "$dir" <<'PY'
import subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "report", "--db", sys.argv[2]], stdout=subprocess.DEVNULL)
peak = {"RssAnon": 0, "RssFile": 0}
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            k = line.split(":")[0]
            if k in peak:
                peak[k] = max(peak[k], int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.01)
print(f"peak anonymous RSS {peak['RssAnon'] / 1024:.0f} MiB, file-backed {peak['RssFile'] / 1024:.0f} MiB (polled)")
PY
grep -m2 -E "held the job back|stalls" "$dir/out.txt"
python3 - "$dir/out.json" "$straggler" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
inc = run["incidents"]
node, rank = f"gpu-{int(sys.argv[2]):02d}", int(sys.argv[2]) * 8 + 5
ok = len(inc) == 1 and inc[0]["straggler_node"] == node and inc[0]["straggler"]["rank"] == rank \
     and inc[0]["device"] == "loop1"
print(f"{len(inc)} stall(s); injected node {node}, rank {rank}, loop1 named: {'yes' if ok else 'NO'}")
sys.exit(0 if ok else 1)
PY
