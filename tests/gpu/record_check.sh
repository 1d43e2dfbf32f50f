#!/usr/bin/env bash
# GPU-host check of what the recorder writes about GPUs, on the real driver: a PyTorch matmul
# loop runs while `stallwatch record --gpu 0` records, then:
#   - the gpus table names the GPU and its memory (described once, with its first readings);
#   - only the selected GPU is sampled, with utilisation, GPM activity and power;
#   - `--gpu` naming no GPU is said, and the recorder goes on;
#   - the job holding the GPU is found, and `export` of it reports like the whole recording.
# Usage: tests/gpu/record_check.sh STALLWATCH_BINARY OUT_DIR
set -uo pipefail
bin=${1:?usage: record_check.sh STALLWATCH_BINARY OUT_DIR}
out=${2:?usage: record_check.sh STALLWATCH_BINARY OUT_DIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
q() { python3 -c "import sqlite3,sys; [print(*r, sep=' | ') for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$@"; }

echo "== host"; nvidia-smi -L
first_uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
"$bin" record --db "$out/gpu0.db" --interval 1s --duration 24s --flush-interval 1s --gpu 0 --gpu 99 \
  --socket "$out/dl.sock" 2> "$out/record.log" &
rec=$!
sleep 3
python3 "$here/tests/gpu/matmul_load.py" --seconds 14 > "$out/load.log"
wait $rec
echo "recorder exit: $?"
grep -E "gpu:|collector gpu" "$out/record.log"
echo "== gpus table (expect one row: name, memory total)"
q "$out/gpu0.db" "SELECT gpu_index, uuid, name, memory_total_bytes FROM gpus"
echo "first GPU's UUID per nvidia-smi: $first_uuid"
echo "== gpu samples per GPU (expect only index 0)"
q "$out/gpu0.db" "SELECT g.gpu_index, count(*), round(max(s.utilization_percent)), round(max(s.sm_active_percent),1), round(max(s.tensor_active_percent),1), round(max(s.power_watts)) FROM gpu_samples s JOIN gpus g USING (gpu_id) GROUP BY g.gpu_index"
echo "== jobs"
"$bin" jobs --db "$out/gpu0.db" | head -8
job=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j[0]['job_id'] if j else '')" <("$bin" jobs --db "$out/gpu0.db" --json))
if [ -n "$job" ]; then
  "$bin" export --db "$out/gpu0.db" --job "$job" -o "$out/export.db"
  if cmp -s <("$bin" report --json --db "$out/export.db") <("$bin" report --json --db "$out/gpu0.db" --job "$job"); then
    echo "export: its report equals the recording's report of job $job"
  else
    echo "export: REPORTS DIFFER"
  fi
else
  echo "no job found"
fi
"$bin" report --db "$out/gpu0.db" | head -12
