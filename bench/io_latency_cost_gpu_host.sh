#!/usr/bin/env bash
# What the per-I/O latency programs cost on a host of real drives (issue 47): for each binary
# given, the agent records with --collector.io_latency while 4 KiB direct reads run at QD1 on
# each device named (a whole NVMe namespace, a loop device...), under the kernel's BPF statistics
# (kernel.bpf_stats_enabled=1); each program's run time per run is read with bpftool and summed
# per block request. Binaries alternate, ROUNDS times. Root. Reads only. READERS=N runs N readers
# at once (requests from several CPUs: what sharing the programs' maps costs). JOB=CONTROLLERS
# makes the readers a followed job (--cgroup) in a cgroup v2 whose parent hands down only those
# controllers ("memory": a login session's scope; "": none): how each binary tells a job's
# requests when its cgroup lacks io (issue 47); each round then says how many of the readers'
# reads the agent counted as the job's.
# STATS=0 leaves the statistics off (their own clock reads are ~86 ns a program on a 16-core
# host) and READER=PROGRAM reads instead of direct_reads.py (bench/direct_reads.c, a few us a
# read): the reads counted then say what the programs add, against "off" (no agent) among the
# binaries.
#   bench/io_latency_cost_gpu_host.sh "BIN_A BIN_B" "DEV..." [SECONDS] [ROUNDS] [BPFTOOL]
set -uo pipefail
bins=$1; devs=$2; secs=${3:-6}; rounds=${4:-3}; bpftool=${5:-bpftool}; readers=${READERS:-1}
reader=${READER:-python3 $(cd "$(dirname "$0")" && pwd)/direct_reads.py}; stats_on=${STATS:-1}
here=$(cd "$(dirname "$0")" && pwd)
stats=/proc/sys/kernel/bpf_stats_enabled
was=$(cat $stats)
job_args=() in_job=()
if [ -n "${JOB+set}" ]; then
  v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
  parent=$v2/stallwatch-cost-$$ job=$v2/stallwatch-cost-$$/job
  mkdir "$parent"
  # A hybrid host's memory is v1's: the job's v1 memory cgroup mirrors its v2 one (as systemd
  # keeps them).
  memory_v1=$(awk '{for (i = 7; i < NF; i++) if ($i == "-") {
    if ($(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)memory(,|$)/) {print $5; exit} }}' /proc/self/mountinfo)
  mirror=$job
  for c in $JOB; do
    if [ "$c" = memory ] && [ -n "$memory_v1" ]; then
      mirror=$memory_v1/stallwatch-cost-$$/job
      mkdir -p "$mirror"
    else
      echo "+$c" > "$parent/cgroup.subtree_control"
    fi
  done
  mkdir "$job"
  echo "job cgroup's controllers: $(cat "$job/cgroup.controllers")${memory_v1:+; its v1 memory cgroup $mirror}"
  job_args=(--cgroup "$job")
  in_job=(sh -c 'echo $$ > "$0/cgroup.procs" && echo $$ > "$1/cgroup.procs" && shift && exec "$@"' "$job" "$mirror")
fi
cleanup() {
  echo "$was" > $stats
  if [ -n "${job:-}" ]; then
    rmdir "$job" "$parent" 2>/dev/null
    [ "$mirror" != "$job" ] && rmdir "$mirror" "$(dirname "$mirror")" 2>/dev/null
  fi
}
trap cleanup EXIT
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
      agent=
      if [ "$bin" != off ]; then
        "$bin" record --db "$work/sw.db" --no-collector.gpu --collector.io_latency --health-interval 0s \
          --socket "$work/dl.sock" "${job_args[@]}" > "$work/agent.log" 2>&1 &
        agent=$!
      fi
      sleep 2
      # A member from before the reads on (the job exists when they start); not this shell's job,
      # so its end is not reported.
      [ -n "${job:-}" ] && ( "${in_job[@]}" sleep $((secs + 20)) & )
      # A second of reads and eleven ticks: the agent settles how it times a request's start
      # first, then leaves the start's program after ten ticks without need (issue 47).
      settle=$("${in_job[@]}" $reader "$dev" 1)
      sleep 11.5
      [ "$stats_on" = 1 ] && echo 1 > $stats
      before=$(progs)
      reads=$(for r in $(seq 1 "$readers"); do "${in_job[@]}" $reader "$dev" "$secs" & done | awk '{n += $1} END {print n}')
      after=$(progs)
      echo "$was" > $stats
      sleep 1.5
      if [ -z "$agent" ]; then
        pkill -f "sleep $((secs + 20))"
        echo "$dev round $round off: $reads reads, $(awk "BEGIN {printf \"%.0f\", $secs * 1e9 / $reads}") ns a read"
        rm -rf "$work"
        continue
      fi
      kill "$agent"; wait "$agent" 2>/dev/null
      if [ -n "${job:-}" ]; then
        pkill -f "sleep $((secs + 20))"
        counted=$(python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT coalesce(sum(l.count), 0) FROM io_latency_samples l JOIN block_devices d USING (device_id) WHERE d.name = ? AND l.op = ? AND l.job_id IS NOT NULL", (sys.argv[2], "read")).fetchone()[0])' "$work/sw.db" "$(basename "$(readlink -f "$dev")")" 2>/dev/null || echo "?")
        echo "  the job's reads: $((settle + reads)), counted as the job's: $counted; $(grep -oE "(each request's start traced|one program a request[^;]*) at exit" "$work/agent.log")"
      fi
      python3 - "$bin" "$dev" "$round" "$reads" "$before" "$after" "$secs" <<'PY'
import sys
bin, dev, rnd, reads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
read_ns = float(sys.argv[7]) * 1e9 / reads
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
      f"; {per:.0f} ns a request; {read_ns:.0f} ns a read")
PY
      rm -rf "$work"
    done
  done
done
