#!/usr/bin/env bash
# Issue 48's runs on the GPU host (root): jobs as users run them (ResNet-50 in bf16 at 224x224,
# WORKERS persistent DataLoader workers with pin_memory=True, no stallwatch hook), recorded by
# `stallwatch record` with no --pid, each left to end as PyTorch ends it: the loop returns and
# the interpreter joins the persistent workers (about 5 s a worker). Runs:
#   exit       nothing injected: a healthy job lingering at its exit
#   stopped    from T_IN to T_OUT its DataLoader workers are stopped (SIGSTOP, then SIGCONT): a
#              mid-run hang, then the same exit
#   ckptslow   at T_IN the job saves a CKPT_GB checkpoint to a disk whose writes its cgroup
#              limits (io.max wbps=CKPT_BPS): a slowed checkpoint, then the exit
# LINGER_S > 0: the job stays that long after its last step with its model on the GPU and its
# workers alive before it returns (a shutdown that joins its workers slowly, as issue 48's
# 12-worker job did for ~60 s; PyTorch 2.11 here joins them at once); with a slow DECODE_US the
# workers are still busy with their prefetched batches for the linger's first seconds.
# Each leaves OUT/<run>.db, <run>.window (the injected start and end, or the save as the job
# timed it; "exit" the last step and the job's exit), <run>.exit (the last step and the exit), <run>.steps, the job's and agent's logs,
# <run>.events (the live events as the agent's hook saw them).
# Usage: tests/gpu/exit_runs.sh CARRY_DIR OUT_DIR [RUNS...]
set -uo pipefail
carry=${1:?}; out=${2:?}; shift 2
bin=$carry/sw
runs=${*:-exit stopped ckptslow}
here=$(cd "$(dirname "$0")/../.." && pwd)
RUN_S=${RUN_S:-45}; T_IN=${T_IN:-25}; T_OUT=${T_OUT:-40}; WORKERS=${WORKERS:-12}
DECODE_US=${DECODE_US:-1500}; LINGER_S=${LINGER_S:-0}; CKPT_GB=${CKPT_GB:-2}; CKPT_BPS=${CKPT_BPS:-104857600}
mkdir -p "$out"
echo "kernel $(uname -r); $(nproc) CPUs; $(nvidia-smi -L | head -1)"
work=$(mktemp -d /var/tmp/stallwatch-exit-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 16000) || { echo "dataset setup failed"; exit 1; }
truncate -s 6G "$work/ckpt.img"; mkfs.ext4 -q -F "$work/ckpt.img"
ckpt_loop=$(losetup -f --show "$work/ckpt.img"); mkdir -p "$work/ckpt"; mount "$ckpt_loop" "$work/ckpt"
ckpt_dev=$(lsblk -ndo MAJ:MIN "$ckpt_loop" | tr -d ' ')
parent=/sys/fs/cgroup/stallwatch; cg=$parent/job
echo "+io +cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
mkdir -p "$parent"; echo "+io +cpu +memory" > "$parent/cgroup.subtree_control" 2>/dev/null || true
mkdir -p "$cg"

for run in $runs; do
  echo "== run $run"
  extra=; [ "$LINGER_S" != 0 ] && extra="--linger $LINGER_S"
  [ "$run" = ckptslow ] && extra="$extra --checkpoint-at $((T_IN - 12)) --checkpoint-gb $CKPT_GB --checkpoint-dir $work/ckpt"
  echo "$ckpt_dev rbps=max wbps=max" > "$cg/io.max"
  [ "$run" = ckptslow ] && echo "$ckpt_dev wbps=$CKPT_BPS" > "$cg/io.max"
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$bin" record --db "$out/$run.db" --interval 1s --flush-interval 1s \
      --on-incident "$here/tests/gpu/latency_hook.sh" "$out/$run.events" 2> "$out/$run.agent.log" &
  agent=$!
  sleep 1
  ( echo $BASHPID > "$cg/cgroup.procs"; exec env PYTHONPATH="$here/python" PYTHONUNBUFFERED=1 python3 \
      "$here/tests/gpu/train_job.py" "$work/mnt/train" --seconds "$RUN_S" --workers "$WORKERS" \
      --decode-us "$DECODE_US" --model resnet50 --bf16 --size 224 --batch 64 --pin-memory --no-hook \
      $extra --step-log "$out/$run.steps" ) > "$out/$run.job.log" 2>&1 &
  job=$!
  sleep "$T_IN"
  t_in=$(date +%s%3N)
  if [ "$run" = stopped ]; then
    workers=$(pgrep -P "$(pgrep -f -o train_job.py)"); kill -STOP $workers; echo "stopped workers: $(echo $workers | wc -w)"
    sleep $((T_OUT - T_IN)); kill -CONT $workers
  fi
  t_out=$(date +%s%3N)
  echo "$t_in $t_out" > "$out/$run.window"
  wait $job; t_exit=$(date +%s%3N); echo "job: $(grep 'steps in' "$out/$run.job.log")"
  echo "$(awk '/ end / {printf "%d", $NF * 1000}' "$out/$run.job.log") $t_exit" > "$out/$run.exit"
  if [ "$run" = exit ]; then
    last=$(awk '/ end / {print $NF}' "$out/$run.job.log")
    python3 -c "import sys; print(round(float(sys.argv[1]) * 1000), sys.argv[2])" "$last" "$t_exit" > "$out/$run.window"
  fi
  if [ "$run" = ckptslow ]; then
    awk '/checkpoint .* from/ {printf "%d %d\n", $(NF-2) * 1000, $NF * 1000}' "$out/$run.job.log" > "$out/$run.window"
    rm -f "$work/ckpt/checkpoint.pt"
  fi
  echo "last step to exit: $(awk '/ end / {print $NF}' "$out/$run.job.log") .. $((t_exit / 1000))"
  sleep 12
  kill -TERM $agent; wait $agent
  "$bin" incidents --db "$out/$run.db" --recompute 2>&1 | head -12
  [ -f "$out/$run.events" ] && cat "$out/$run.events"
done
umount "$work/mnt" "$work/ckpt"; losetup -d "$loop" "$ckpt_loop"; rm -rf "$work"
rmdir "$cg" "$parent" 2>/dev/null
for db in "$out"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$db"; done
rm -f "$out"/*.db-wal "$out"/*.db-shm
