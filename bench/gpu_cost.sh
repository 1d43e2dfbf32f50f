#!/usr/bin/env bash
# The agent's cost on a GPU host beside a real multi-GPU training job (tests/gpu/train_ddp.py
# under torchrun, one rank per GPU, 8 DataLoader workers each), side by side in one run:
#   before  stallwatch record --gpu-utilization samples --gpu-process-every 1 (the old reads:
#           the sample buffer and per-process utilisation every interval, for every GPU); or,
#           with BEFORE_BIN set, that binary (an earlier build) with its defaults;
#   after   stallwatch record with its defaults;
#   floor   nvml_call_bench --floor: nvmlDeviceGetUtilizationRates + memory info per GPU per
#           second and nothing else;
#   anchor  nvidia-smi dmon -s u -d 1, what a user would run instead.
# Prints each one's CPU per second and per GPU over the same WINDOW seconds, the agents' RSS
# (anonymous and file-backed), their tick lateness (p50/p99 of how late each tick's samples
# were against the first tick's one-second grid), their collectors' cost per collection, and
# how the two agents' utilisation readings of the same GPUs compare.
# Also: the floor's RSS (what NVML alone costs a process), and the after agent's smaps.
# AFTER_BIN: the after agent (default CARRY_DIR/sw; swapped with BEFORE_BIN, an order check).
# NPROC: the job's ranks (default one per GPU; more share the GPUs, through gloo: what a job of
# many ranks costs the jobs collector on a host with few GPUs).
# SCRAPE=1: both agents serve /metrics and are scraped once a second over a kept connection (as
# Prometheus scrapes), and their CPU is also counted in ns from their threads' schedstat.
# Usage (root, on the GPU host): [BEFORE_BIN=OLD] [NPROC=N] bench/gpu_cost.sh CARRY_DIR OUT_DIR [WINDOW=60]
set -uo pipefail
carry=${1:?}; out=${2:?}; window=${3:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${AFTER_BIN:-$carry/sw}
ngpu=$(nvidia-smi -L | wc -l)
nproc=${NPROC:-$ngpu}
mkdir -p "$out"
work=$(mktemp -d /var/tmp/stallwatch-cost-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 16000) || { echo "dataset setup failed"; exit 1; }
echo "$ngpu GPUs, a job of $nproc ranks x 8 workers: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); kernel $(uname -r)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

cpu_ns() { cat /proc/$1/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s}'; }
listen_before=(); listen_after=()
if [ "${SCRAPE:-0}" = 1 ]; then listen_before=(--listen 127.0.0.1:19281); listen_after=(--listen 127.0.0.1:19282); fi

mkdir -p -m 0755 "$work/before" "$work/after"
if [ -n "${BEFORE_BIN:-}" ]; then
  "$BEFORE_BIN" record --db "$out/before.db" --interval 1s --socket "$work/before/dl.sock" "${listen_before[@]}" 2> "$out/before.log" &
else
  "$bin" record --db "$out/before.db" --interval 1s --gpu-utilization samples --gpu-process-every 1 \
    --socket "$work/before/dl.sock" "${listen_before[@]}" 2> "$out/before.log" &
fi
before=$!
"$bin" record --db "$out/after.db" --interval 1s --socket "$work/after/dl.sock" "${listen_after[@]}" 2> "$out/after.log" &
after=$!
scraper=
if [ "${SCRAPE:-0}" = 1 ]; then
  python3 - "$((window + 40))" <<'PY' > "$out/scrape.log" 2>&1 &
import http.client, sys, time
end = time.monotonic() + int(sys.argv[1])
conns = {}
while time.monotonic() < end:
    for port in (19281, 19282):
        try:
            c = conns.setdefault(port, http.client.HTTPConnection("127.0.0.1", port, timeout=5))
            c.request("GET", "/metrics"); c.getresponse().read()
        except (OSError, http.client.HTTPException):
            conns.pop(port, None)
    time.sleep(1 - time.monotonic() % 1)
PY
  scraper=$!
fi
PYTHONPATH="$here/python" OMP_NUM_THREADS=2 python3 -m torch.distributed.run --standalone \
  --nproc-per-node "$nproc" "$here/tests/gpu/train_ddp.py" "$work/mnt/train" --seconds $((window + 50)) \
  --workers 8 --decode-us 2000 > "$out/job.log" 2>&1 &
job=$!
sleep 30  # the job's start: NCCL, CUDA contexts, the first batches
nvidia-smi dmon -s u -d 1 > "$out/dmon.log" 2>&1 &
dmon=$!
sleep 2
b0=$(cpu_ticks $before); a0=$(cpu_ticks $after); d0=$(cpu_ticks $dmon); bn0=$(cpu_ns $before); an0=$(cpu_ns $after)
t0=$(date +%s%3N)
LD_LIBRARY_PATH="$carry/lib" "$carry/nvml_call_bench" --floor "$((window + 5))" > "$out/floor.log" 2>&1 &
floor=$!
sleep "$window"
b1=$(cpu_ticks $before); a1=$(cpu_ticks $after); d1=$(cpu_ticks $dmon); bn1=$(cpu_ns $before); an1=$(cpu_ns $after)
t1=$(date +%s%3N)
for p in $before $after $floor; do grep -E "^(RssAnon|RssFile|VmHWM)" "/proc/$p/status" | tr -s ' \t' ' ' | tr '\n' ' '; echo; done > "$out/rss.txt"
cat "/proc/$after/smaps" > "$out/after.smaps"
wait $floor
kill $dmon; wait $dmon 2>/dev/null
[ -n "$scraper" ] && { kill $scraper; wait $scraper 2>/dev/null; }
wait $job; echo "job exit $?: $(grep -h 'steps in' "$out/job.log" | tr '\n' ' ')"
kill -TERM $before $after; wait $before $after
umount "$work/mnt"; losetup -d "$loop"; rm -rf "$work"

per() {  # NAME TICKS_BEFORE TICKS_AFTER
  awk -v n="$1" -v a="$2" -v b="$3" -v hz="$hz" -v w="$window" -v g="$ngpu" 'BEGIN {
    ms = (b - a) / hz * 1000 / w
    printf "%-8s %8.3f ms CPU per second (%.3f %% of a core), %.3f ms per GPU per sample\n", n, ms, ms / 10, ms / g }'
}
echo "== CPU over the same ${window} s (from /proc/PID/stat, ${hz} ticks/s)"
per before "$b0" "$b1"
per after "$a0" "$a1"
cat "$out/floor.log"
per dmon "$d0" "$d1"
echo "== the agents' threads (schedstat, ns): before $(( (bn1 - bn0) / window / 1000 )) us, after $(( (an1 - an0) / window / 1000 )) us of CPU per second$([ "${SCRAPE:-0}" = 1 ] && echo ", each scraped once a second")"
echo "== RSS at the end of the window (kB): before, after, floor"
cat "$out/rss.txt"
echo "== NVML's zero-filled tables (the agents' logs)"
grep -h "NVML" "$out/before.log" "$out/after.log" | sed 's/^/  /'
echo "== collectors' cost per collection"
for a in before after; do echo "$a:"; grep -E "collector (gpu|jobs|diskstats|pressure):" "$out/$a.log" | sed 's/.*collector/  collector/'; done
python3 - "$out/before.db" "$out/after.db" "$t0" "$t1" <<'PY'
import sqlite3, sys, statistics
t0, t1 = int(sys.argv[3]), int(sys.argv[4])
series = {}
for name, path in (("before", sys.argv[1]), ("after", sys.argv[2])):
    db = sqlite3.connect(path)
    ts = [r[0] for r in db.execute(
        "SELECT DISTINCT ts_ms FROM gpu_samples WHERE ts_ms BETWEEN ? AND ? ORDER BY ts_ms", (t0, t1))]
    late = []
    for t in ts:
        k = round((t - ts[0]) / 1000)
        late.append(t - (ts[0] + k * 1000))
    base = min(late)
    late = sorted(x - base for x in late)
    p = lambda q: late[min(len(late) - 1, int(q * len(late)))]
    print(f"{name}: {len(ts)} ticks, lateness p50 {p(0.5)} ms, p99 {p(0.99)} ms, max {late[-1]} ms")
    series[name] = {(g, t // 1000): u for g, t, u in db.execute(
        "SELECT gpu_id, ts_ms, utilization_percent FROM gpu_samples WHERE ts_ms BETWEEN ? AND ? "
        "AND utilization_percent IS NOT NULL", (t0, t1))}
# Every GPU reading of the two agents over the window, side by side: the after agent's NVML
# (its zero-filled tables given back) must read what the before agent's does.
columns = ("utilization_percent", "memory_used_bytes", "sm_clock_mhz", "power_watts",
           "sm_active_percent", "sm_occupancy_percent", "tensor_active_percent",
           "dram_active_percent")
readings = {}
for name, path in (("before", sys.argv[1]), ("after", sys.argv[2])):
    db = sqlite3.connect(path)
    have = {r[1] for r in db.execute("PRAGMA table_info(gpu_samples)")}
    readings[name] = {}
    for c in columns:
        if c not in have:
            continue
        readings[name][c] = {(g, t // 1000): v for g, t, v in db.execute(
            f"SELECT gpu_id, ts_ms, {c} FROM gpu_samples WHERE ts_ms BETWEEN ? AND ? "
            f"AND {c} IS NOT NULL", (t0, t1))}
for c in columns:
    b, a = readings["before"].get(c, {}), readings["after"].get(c, {})
    both = sorted(set(b) & set(a))
    if not b and not a:
        continue
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    diffs = sorted(abs(b[k] - a[k]) for k in both)
    print(f"{c:24s} before {len(b):3d} readings median {med(list(b.values())):12.1f}; "
          f"after {len(a):3d} median {med(list(a.values())):12.1f}; "
          f"|difference| median {med(diffs):10.1f} over {len(both)} shared seconds")
common = sorted(set(series["before"]) & set(series["after"]))
if common:
    b = [series["before"][k] for k in common]
    a = [series["after"][k] for k in common]
    diff = sorted(abs(x - y) for x, y in zip(b, a))
    print(f"utilisation, same GPU and second: before (buffer mean) median {statistics.median(b):.1f} %, "
          f"after (rate) median {statistics.median(a):.1f} %, |difference| median {diff[len(diff) // 2]:.1f} "
          f"p90 {diff[int(0.9 * len(diff))]:.1f} points over {len(common)} readings")
PY
