#!/usr/bin/env bash
# GPU-host check of job awareness (issue 3): a real PyTorch job with a 4-worker DataLoader
# reads files from ext4 on a loop device; the agent runs with no --pid and must find the job,
# track its workers, and name the loop device and the disk under it.
# Usage: tests/gpu/job_check.sh STALLWATCH_BINARY OUT_DIR   (root)
set -uo pipefail
bin=${1:?}; out=${2:?}
here=$(cd "$(dirname "$0")/../.." && pwd)
TRAIN_S=${TRAIN_S:-30}
mkdir -p "$out"
work=$(mktemp -d /var/tmp/stallwatch-job-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 12000) || { echo "dataset setup failed"; exit 1; }
echo "dataset on $loop ($(du -sh "$work/mnt/train" | cut -f1)), image $work/data.img"
"$bin" record --db "$out/job.db" --interval 1s 2> "$out/record.log" &
agent=$!
sleep 2
PYTHONPATH="$here/python" python3 "$here/tests/gpu/train_job.py" "$work/mnt/train" --seconds "$TRAIN_S" --workers 4 | tee "$out/train.log"
sleep 3
kill -TERM $agent; wait $agent; echo "agent exit: $?"
tail -8 "$out/record.log"
"$bin" jobs --db "$out/job.db"
"$bin" jobs --db "$out/job.db" --json > "$out/jobs.json"
sqlite3_q() { python3 -c "import sqlite3,sys; [print(*r, sep=' | ') for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$@"; }
echo "== job processes"; sqlite3_q "$out/job.db" "SELECT job_id, pid, role, comm FROM job_processes"
echo "== per interval"; sqlite3_q "$out/job.db" "SELECT time_utc, steps, samples, round(steps_per_second,2), round(data_wait_share,3), round(read_bytes_per_second/1e6,1), round(workers_cpu_ratio,2), d_state_threads FROM job_dataloader"
echo "== devices"; sqlite3_q "$out/job.db" "SELECT name, r_await_ms IS NOT NULL, round(avg(reads_per_second)), round(avg(r_await_ms),3) FROM disk_samples JOIN block_devices USING (device_id) WHERE name IN ('$(basename "$loop")', 'vda') GROUP BY name"
umount "$work/mnt"; losetup -d "$loop"; rm -rf "$work"
