#!/usr/bin/env bash
# GPU-host check of the recording agent (run on a machine with an NVIDIA GPU, PyTorch and the
# CUDA Toolkit):
#   1. compiles collectors/gpu/nvml_abi_check.cpp against the toolkit's nvml.h;
#   2. `stallwatch devices` must list the GPU;
#   3. measures the GPU collector's cost per sample, with and without the PCIe reads;
#   4. records while a PyTorch matmul loop runs for LOAD_S seconds, then idles, and prints
#      GPU utilisation per second: above 90 % during the loop, near 0 after it.
# Usage: tests/gpu/nvml_check.sh STALLWATCH_BINARY OUT_DIR
set -uo pipefail
bin=${1:?usage: nvml_check.sh STALLWATCH_BINARY OUT_DIR}
out=${2:?usage: nvml_check.sh STALLWATCH_BINARY OUT_DIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
LOAD_S=${LOAD_S:-20}
mkdir -p "$out"

echo "== host"; uname -r; nvidia-smi -L

echo "== 1. nvml.h ABI check"
nvml_h=$(find /usr/local/cuda/include /usr/local/cuda/targets/*/include /usr/include -name nvml.h 2>/dev/null | head -1)
if [ -n "$nvml_h" ]; then
  echo "nvml.h: $nvml_h"
  if c++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$(dirname "$nvml_h")" -I"$here" "$here/collectors/gpu/nvml_abi_check.cpp"; then
    echo "ABI check: declarations match nvml.h"
  else
    echo "ABI check: FAILED"
  fi
else
  echo "ABI check: no nvml.h found"
fi

echo "== 2. stallwatch devices"
"$bin" devices

echo "== 3. GPU collector cost per sample (idle GPU, 10 samples each)"
if [ -x "${NVML_BENCH:-}" ]; then "$NVML_BENCH" 20; fi
"$bin" record --db "$out/cost-pcie.db" --interval 1s --duration 10s --no-collector.diskstats --no-collector.pressure 2>&1 | grep 'collector gpu'
"$bin" record --db "$out/cost-nopcie.db" --interval 1s --duration 10s --no-collector.diskstats --no-collector.pressure --no-gpu-pcie 2>&1 | grep 'collector gpu'

echo "== 4. recording a matmul loop"
"$bin" record --db "$out/gpu.db" --interval 1s --duration $((LOAD_S + 16))s --flush-interval 1s 2> "$out/record.log" &
rec=$!
sleep 4
python3 "$here/tests/gpu/matmul_load.py" --seconds "$LOAD_S" | tee "$out/load.log"
load_start=$(awk '/start/{print $4}' "$out/load.log")
load_end=$(awk '/end/{print $4}' "$out/load.log")
wait $rec
echo "recorder exit: $?"; tail -4 "$out/record.log"
python3 - "$out/gpu.db" "$load_start" "$load_end" <<'PY'
import sqlite3, sys
db, start, end = sys.argv[1], float(sys.argv[2]) * 1000, float(sys.argv[3]) * 1000
rows = sqlite3.connect(db).execute(
    "SELECT ts_ms, utilization_percent, utilization_sample_count, memory_used_bytes, sm_clock_mhz, "
    "pcie_rx_bytes_per_second FROM gpu_samples ORDER BY ts_ms").fetchall()
procs = sqlite3.connect(db).execute(
    "SELECT count(*), count(DISTINCT pid), max(sm_utilization_percent) FROM gpu_process_samples").fetchone()
inside, after = [], []
for ts, util, n, mem, clock, rx in rows:
    phase = "load" if start + 1000 <= ts <= end else ("after" if ts > end + 2000 else "edge")
    if util is not None:
        (inside if phase == "load" else after if phase == "after" else []).append(util)
    print(f"{(ts - start) / 1000:7.1f}s {phase:5} util={util} samples={n} mem={mem} sm={clock}MHz pcie_rx={rx}")
print(f"during load: min {min(inside):.1f} % median {sorted(inside)[len(inside)//2]:.1f} % over {len(inside)} intervals")
print(f"after load:  max {max(after):.1f} % over {len(after)} intervals")
print(f"per-process rows {procs[0]}, distinct pids {procs[1]}, max SM {procs[2]}")
ok = min(inside) > 90 and max(after) < 5
print("RESULT:", "PASS" if ok else "FAIL")
PY
