#!/usr/bin/env bash
# What the per-I/O latency programs cost on a host of real drives (issue 47): for each binary
# given, the agent records with --collector.io_latency while 4 KiB direct reads run at QD1 on
# each device named (a whole NVMe namespace, a loop device...), under the kernel's BPF statistics
# (kernel.bpf_stats_enabled=1); each program's run time per run is read with bpftool and summed
# per block request. Binaries alternate, ROUNDS times. Root. Reads only. READERS=N runs N readers
# at once (requests from several CPUs: what sharing the programs' maps costs).
#   bench/io_latency_cost_gpu_host.sh "BIN_A BIN_B" "DEV..." [SECONDS] [ROUNDS] [BPFTOOL]
set -uo pipefail
bins=$1; devs=$2; secs=${3:-6}; rounds=${4:-3}; bpftool=${5:-bpftool}; readers=${READERS:-1}
here=$(cd "$(dirname "$0")" && pwd)
stats=/proc/sys/kernel/bpf_stats_enabled
was=$(cat $stats)
trap 'echo "$was" > $stats' EXIT
progs() {  # name run_cnt run_time_ns, for the collector's programs
  "$bpftool" prog show --json | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name") in ("on_io_start", "on_issue", "on_requeue", "on_complete"):
        print(p["name"], p.get("run_cnt", 0), p.get("run_time_ns", 0))'
}
for dev in $devs; do
  for round in $(seq 1 "$rounds"); do
    for bin in $bins; do
      work=$(mktemp -d)
      "$bin" record --db "$work/sw.db" --no-collector.gpu --collector.io_latency --health-interval 0s \
        --socket "$work/dl.sock" > "$work/agent.log" 2>&1 &
      agent=$!
      sleep 2
      # A second of reads and eleven ticks: the agent settles how it times a request's start
      # first, then leaves the start's program after ten ticks without need (issue 47).
      python3 "$here/direct_reads.py" "$dev" 1 > /dev/null
      sleep 11.5
      echo 1 > $stats
      before=$(progs)
      reads=$(for r in $(seq 1 "$readers"); do python3 "$here/direct_reads.py" "$dev" "$secs" & done | awk '{n += $1} END {print n}')
      after=$(progs)
      echo "$was" > $stats
      kill "$agent"; wait "$agent" 2>/dev/null
      python3 - "$bin" "$dev" "$round" "$reads" "$before" "$after" <<'PY'
import sys
bin, dev, rnd, reads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def parse(text):
    out = {}
    for line in text.splitlines():
        name, cnt, ns = line.split()
        out[name] = (int(cnt), int(ns))
    return out
b, a = parse(sys.argv[5]), parse(sys.argv[6])
parts, completions, total = [], 0, 0
for name in ("on_io_start", "on_issue", "on_complete"):
    if name not in a:
        continue
    runs = a[name][0] - b.get(name, (0, 0))[0]
    ns = a[name][1] - b.get(name, (0, 0))[1]
    total += ns
    if name == "on_complete":
        completions = runs
    parts.append(f"{name} {ns / runs:.0f} ns" if runs else f"{name} -")
per = total / completions if completions else float("nan")
print(f"{dev} round {rnd} {bin}: {reads} reads, {completions} requests; " + ", ".join(parts) +
      f"; {per:.0f} ns a request")
PY
      rm -rf "$work"
    done
  done
done
