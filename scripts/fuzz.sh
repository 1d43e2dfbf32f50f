#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan+UBSan) in build-fuzz/ and runs each for
# SECONDS (default 20) on seeds from tests/fixtures. Prints one line per harness: executions,
# coverage, and findings; exits non-zero if any harness found a crash, a leak or UB.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
seconds=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
fx=$root/tests/fixtures
mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLWATCH_FUZZ=ON \
  -DSTALLWATCH_TESTS=OFF -DSTALLWATCH_BENCH=OFF -DSTALLWATCH_WERROR=OFF > /dev/null
targets=(diskstats pressure mountinfo mountstats proc_pid statsd udev_db nvme_log ata_blob smartctl_json config)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}" > "$build/fuzz-build.log" 2>&1 ||
  { tail -30 "$build/fuzz-build.log"; exit 1; }

seed() {  # TARGET FILES...: copies seed files into the target's corpus
  local dir=$build/corpus/$1; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$dir/$(echo "$f" | md5sum | cut -c1-12)"; done
}
seed diskstats $(find "$fx" -name diskstats)
seed pressure $(find "$fx" -path '*pressure*' -type f)
printf 'cpu  357 0 636 52682 130 0 31 332 0 0\ncpu0 20 0 40 3300 8 0 2 20 0 0\nintr 1 2\n' > "$build/corpus/pressure/stat"
printf 'usage_usec 29334829891\nuser_usec 23721672758\nsystem_usec 5613157133\n' > "$build/corpus/pressure/cpu.stat"
seed mountinfo $(find "$fx" -name mountinfo)
seed mountstats $(find "$fx" -name mountstats)
seed proc_pid $(find "$fx" -path '*/proc/[0-9]*' -type f -name 'stat' -o -path '*/proc/[0-9]*' -name io -type f | head -20)
seed statsd "$root/tests/fixtures/README.md"
# Hostile text (issue 36): bytes that are not UTF-8, control characters, escaped newlines.
printf '36 25 0:32 / /mnt/m\\377\\012x\033[2J rw - ext4 /dev/x\377 rw\n' > "$build/corpus/mountinfo/hostile"
printf '\002SLURM_JOB_ID=bad\377\033[31m\000SLURM_STEP_ID=\300\257\000' > "$build/corpus/proc_pid/environ-hostile"
printf 'stallwatch.steps:1|c|#job:\377\033\n\377:2|ms\n' > "$build/corpus/statsd/hostile"
printf 'stallwatch.steps:1|c\nstallwatch.data_wait:0.25|ms|#rank:0\n' > "$build/corpus/statsd/lines"
seed udev_db $(find "$fx" -path '*udev/data/b*' -type f | head -20)
seed smartctl_json $(ls "$fx"/smartctl/*.json | head -40)
seed config "$root/README.md"
printf '10s' > "$build/corpus/config/d"; printf '[::1]:9877' > "$build/corpus/config/l"
# Binary seeds: an NVMe page and an ATA blob built from real drives by the unit tests' rules.
python3 - "$build/corpus" <<'PY'
import os, struct, sys
c = sys.argv[1]
os.makedirs(f"{c}/nvme_log", exist_ok=True)
page = bytearray(512); page[1:3] = struct.pack("<H", 308); page[3] = 99; page[4] = 10; page[160] = 7
open(f"{c}/nvme_log/page", "wb").write(page)
os.makedirs(f"{c}/ata_blob", exist_ok=True)
def section(tag, data): return struct.pack(">II", tag, len(data)) + data
ident = bytearray(512); ident[164] = 1; ident[170] = 1
data = bytearray(512); data[0] = 0x10; data[2:14] = bytes([5, 1, 0, 100, 99, 0x30, 1, 0, 0, 0, 0, 0])
thr = bytearray(512); thr[0] = 0x10; thr[2] = 5; thr[3] = 10
open(f"{c}/ata_blob/blob", "wb").write(section(0x49444659, bytes(ident)) + section(0x534D5354, b"\0\0\0\1") +
                                       section(0x534D4454, bytes(data)) + section(0x534D5448, bytes(thr)))
PY

# The harnesses run as many at a time as there are cores, each for SECONDS on a core of its own.
fuzz_one() {
  local t=$1 log=$build/fuzz-$1.log
  mkdir -p "$build/corpus/$t" "$build/findings/$t"
  rm -f "$build/fuzz-$t.rc"
  "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$build/findings/$t/" "$build/corpus/$t" > "$log" 2>&1
  echo $? > "$build/fuzz-$t.rc"
}
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$(nproc)" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

status=0
printf '%-14s %12s %10s %8s  %s\n' harness executions exec/s cov findings
for t in "${targets[@]}"; do
  log=$build/fuzz-$t.log
  rc=$(cat "$build/fuzz-$t.rc" 2>/dev/null || echo 1)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  found=$(ls "$build/findings/$t" | wc -l)
  printf '%-14s %12s %10s %8s  %s\n' "$t" "$execs" "$rate" "$cov" \
    "$([ "$rc" -eq 0 ] && [ "$found" -eq 0 ] && echo none || echo "FOUND (rc $rc): $(ls "$build/findings/$t" | head -3)")"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then status=1; grep -m5 -E 'ERROR|runtime error' "$log" || true; fi
done
exit $status
