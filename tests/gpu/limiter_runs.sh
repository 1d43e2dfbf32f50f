#!/usr/bin/env bash
# Issue 31's A/B runs on the GPU host (root): one training job (ResNet-50 in bf16 at 224x224,
# batch 64, DataLoader workers reading files from ext4 on a loop device with direct I/O)
# recorded by `stallwatch record`, with its input side varied one knob at a time:
#   gpu        samples held in memory: nothing to read or decode (the GPU sets the pace)
#   w2 w4 w8 w16  that many workers, DECODE_US of CPU work per sample (decoding, augmenting)
#   nodecode   8 workers, no CPU work per sample: reads only
#   limited    8 workers, no CPU work, the job's cgroup limits its reads of the dataset's loop
#              device (io.max rbps=LIMIT_BPS) for the whole run
#   fetch      4 workers, each sample a remote fetch of FETCH_MS (the worker asleep)
#   host       samples in memory, MAIN_CPU_MS of CPU work in the main thread per step
#   fusestore  8 workers reading the files through a FUSE filesystem that serves each read
#              after FUSE_DELAY_MS (swslowfs): the workers wait on reads
# and each again with -nohook appended: the job without stallwatch.watch(), judged by its main
# thread and GPU, or with -auto appended: the job without the hook started by `stallwatch run --`
# (zero-code reporting). PIN=1 gives the DataLoader pin_memory=True. The job's own step log (<run>.steps: end, wait, step seconds per step) is what
# stallwatch's input-wait share and predicted speed-up are held against (limiter_check.py).
# Usage: tests/gpu/limiter_runs.sh CARRY_DIR OUT_DIR [RUNS...]   (CARRY_DIR: bundle.sh's)
set -uo pipefail
carry=${1:?}; out=${2:?}; shift 2
bin=$carry/sw
runs=${*:-gpu w2 w4 w8 w16 nodecode limited fetch host fusestore}
here=$(cd "$(dirname "$0")/../.." && pwd)
RUN_S=${RUN_S:-30}; DECODE_US=${DECODE_US:-1500}; LIMIT_BPS=${LIMIT_BPS:-20971520}
FETCH_MS=${FETCH_MS:-10}; MAIN_CPU_MS=${MAIN_CPU_MS:-25}; FUSE_DELAY_MS=${FUSE_DELAY_MS:-5}
MODEL_ARGS=${MODEL_ARGS:---model resnet50 --bf16 --size 224 --batch 64}
mkdir -p "$out"
echo "kernel $(uname -r); $(nproc) CPUs; cgroup fs: $(stat -fc %T /sys/fs/cgroup); $(nvidia-smi -L | head -1)"
work=$(mktemp -d /var/tmp/stallwatch-limiter-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 16000) || { echo "dataset setup failed"; exit 1; }
loop_dev=$(lsblk -ndo MAJ:MIN "$loop" | tr -d ' ')
echo "dataset on $loop ($loop_dev)"
# fusectl, where a FUSE mount's queue is read (systemd mounts it on most hosts; this one has none).
mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections
# The FUSE view of the same files, for fusestore.
mkdir -p "$work/slow"; echo 0 > "$work/delay"
if "$carry/swslowfs" "$work/mnt/train" "$work/slow" --delay-file "$work/delay" \
     -o fsname=swslowfs,subtype=swslowfs,allow_other 2> "$out/swslowfs.log"; then
  echo "swslowfs at $work/slow"
else
  echo "swslowfs failed: $(cat "$out/swslowfs.log")"
fi
parent=/sys/fs/cgroup/stallwatch; cg=$parent/job
echo "+io +cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
mkdir -p "$parent"; echo "+io +cpu +memory" > "$parent/cgroup.subtree_control" 2>/dev/null || true
mkdir -p "$cg"

for run in $runs; do
  case_name=${run%-nohook}; hook_flag=; [ "$case_name" != "$run" ] && hook_flag=--no-hook
  launch=; pythonpath="PYTHONPATH=$here/python"
  if [ "${run%-auto}" != "$run" ]; then  # the carried libraries are for the launcher alone
    case_name=${run%-auto}; hook_flag=--no-hook; launch="$bin run -- env -u LD_LIBRARY_PATH"; pythonpath=
  fi
  [ "${PIN:-0}" = 1 ] && hook_flag="$hook_flag --pin-memory"
  data=$work/mnt/train; args="--workers 8"
  case $case_name in
    gpu)       args="--workers 8 --in-memory" ;;
    w*)        args="--workers ${case_name#w} --decode-us $DECODE_US" ;;
    nodecode|limited) args="--workers 8" ;;
    fetch)     args="--workers 4 --fetch-ms $FETCH_MS" ;;
    host)      args="--workers 8 --in-memory --main-cpu-ms $MAIN_CPU_MS" ;;
    fusestore) args="--workers 8"; data=$work/slow ;;
  esac
  echo "== run $run: $args"
  echo "$loop_dev rbps=max" > "$cg/io.max"
  [ "$case_name" = limited ] && echo "$loop_dev rbps=$LIMIT_BPS" > "$cg/io.max"
  echo $([ "$case_name" = fusestore ] && echo "$FUSE_DELAY_MS" || echo 0) > "$work/delay"
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$bin" record --db "$out/$run.db" --interval 1s --flush-interval 1s 2> "$out/$run.agent.log" &
  agent=$!
  sleep 1
  ( echo $BASHPID > "$cg/cgroup.procs"; exec $launch env $pythonpath python3 "$here/tests/gpu/train_job.py" \
      "$data" --seconds "$RUN_S" $args $MODEL_ARGS $hook_flag --step-log "$out/$run.steps" ) > "$out/$run.job.log" 2>&1
  echo "job: $(tail -1 "$out/$run.job.log")"
  sleep 2
  kill -TERM $agent; wait $agent
  "$bin" report --db "$out/$run.db" 2>&1 | sed -n '/limiter/,/incidents/p' | head -12
done
echo 0 > "$work/delay"
umount "$work/slow" 2>/dev/null; umount "$work/mnt"; losetup -d "$loop"; rm -rf "$work"
rmdir "$cg" "$parent" 2>/dev/null
for db in "$out"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$db"; done
rm -f "$out"/*.db-wal "$out"/*.db-shm
