#!/usr/bin/env bash
# Issue 41's runs on the GPU host (root): a GPT-style LM (tests/gpu/train_lm.py) whose DataLoader
# workers tokenise text in Python, as users run it: no stallwatch hook, recorded by
# `stallwatch record` started with no --pid. Runs:
#   pin        WORKERS_FEW (2) workers, pin_memory=True: the loop waits on the pinning thread
#   nopin      the same with pin_memory off
#   pin-w12    12 workers, pin_memory=True: the limit removed (the speed-up on offer, measured)
#   nopin-w12  likewise, pin_memory off
#   parentlimit 12 workers, pin_memory, the dataset's loop device read-limited (io.max
#              rbps=LIMIT_BPS) on the job's PARENT cgroup from before the job starts
#   hook       WORKERS_FEW workers, pin_memory, reporting through stallwatch.watch()
#   auto       the same script unchanged, started by `stallwatch run --` (zero-code reporting)
#   lightning  the same model under a Lightning Trainer (its own loop, a validation loop every
#              200 steps), started by `stallwatch run --`: no code change to report
#   hftrainer  a GPT-2 under a Hugging Face Trainer (which builds its own DataLoader), started by
#              `stallwatch run --`; hftrainer-nohook the same without it
#   endhang    12 workers, pin_memory; after its last step the job stops its workers (SIGSTOP)
#              and waits for a batch forever, until this script kills it HANG_S later
# Each run leaves OUT/<run>.db, <run>.steps (END WAIT STEP per step), the job's and agent's
# logs, <run>.events (the live events the agent's hook saw) and, for endhang, <run>.window
# (the last step and the kill, epoch ms).
# Usage: tests/gpu/lm_runs.sh CARRY_DIR OUT_DIR [RUNS...]   (CARRY_DIR: bundle.sh's)
set -uo pipefail
carry=${1:?}; out=${2:?}; shift 2
bin=$carry/sw
runs=${*:-pin nopin pin-w12 nopin-w12 parentlimit endhang}
here=$(cd "$(dirname "$0")/../.." && pwd)
RUN_S=${RUN_S:-40}; WORKERS_FEW=${WORKERS_FEW:-2}; LIMIT_BPS=${LIMIT_BPS:-1048576}; HANG_S=${HANG_S:-25}
mkdir -p "$out"
echo "kernel $(uname -r); $(nproc) CPUs; $(nvidia-smi -L | head -1)"
work=$(mktemp -d /var/tmp/stallwatch-lm-XXXXXX)
truncate -s 256M "$work/text.img"
loop=$(losetup -f --show --direct-io=on "$work/text.img"); mkfs.ext4 -q -F "$loop"
mkdir -p "$work/mnt"; mount "$loop" "$work/mnt"
python3 -c "import sys; sys.path.insert(0, '$here/tests/gpu'); import train_lm; train_lm.make_corpus('$work/mnt/text', 4000)"
sync; loop_dev=$(lsblk -ndo MAJ:MIN "$loop" | tr -d ' ')
echo "corpus on $loop ($loop_dev): $(du -sh "$work/mnt/text" | cut -f1)"
parent=/sys/fs/cgroup/stallwatch; cg=$parent/job
echo "+io +cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
mkdir -p "$parent"; echo "+io +cpu +memory" > "$parent/cgroup.subtree_control" 2>/dev/null || true
mkdir -p "$cg"

for run in $runs; do
  args="--workers $WORKERS_FEW --pin-memory"
  case $run in
    nopin)       args="--workers $WORKERS_FEW" ;;
    pin-w12)     args="--workers 12 --pin-memory" ;;
    nopin-w12)   args="--workers 12" ;;
    parentlimit) args="--workers 12 --pin-memory" ;;
    hook)        args="--workers $WORKERS_FEW --pin-memory --hook" ;;
    endhang)     args="--workers 12 --pin-memory --hang-at-end" ;;
    auto)        args="--workers $WORKERS_FEW --pin-memory" ;;
    lightning)   args="--workers $WORKERS_FEW --pin-memory --lightning" ;;
    hftrainer*)  args="--workers $WORKERS_FEW --pin-memory --hf-trainer" ;;
  esac
  # Through the launcher: the carried binary's libraries are for it alone, not for PyTorch.
  # (Its PYTHONPATH is the launcher's: the bootstrap, which finds the package itself.)
  launch=; pythonpath="PYTHONPATH=$here/python"
  if [ "$run" = auto ] || [ "$run" = lightning ] || [ "$run" = hftrainer ]; then launch="$bin run -- env -u LD_LIBRARY_PATH"; pythonpath=; fi
  echo "== run $run: $args"
  echo "$loop_dev rbps=max" > "$parent/io.max"
  [ "$run" = parentlimit ] && echo "$loop_dev rbps=$LIMIT_BPS" > "$parent/io.max" && echo "parent io.max: $(cat "$parent/io.max")"
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$bin" record --db "$out/$run.db" --interval 1s --flush-interval 1s \
      --on-incident "$here/tests/gpu/latency_hook.sh" "$out/$run.events" 2> "$out/$run.agent.log" &
  agent=$!
  sleep 1
  ( echo $BASHPID > "$cg/cgroup.procs"; exec $launch env $pythonpath PYTHONUNBUFFERED=1 python3 \
      "$here/tests/gpu/train_lm.py" "$work/mnt/text" --make-files 0 --seconds "$RUN_S" $args \
      --step-log "$out/$run.steps" ) > "$out/$run.job.log" 2>&1 &
  job=$!
  if [ "$run" = endhang ]; then
    for _ in $(seq 900); do grep -q "hang at end" "$out/$run.job.log" && break; sleep 0.1; done
    sleep "$HANG_S"
    last=$(awk '/ end / {print $NF}' "$out/$run.job.log")
    kill -KILL -- $(cat "$cg/cgroup.procs") 2>/dev/null
    python3 -c "import sys, time; print(round(float(sys.argv[1]) * 1000), round(time.time() * 1000))" "$last" > "$out/$run.window"
  fi
  wait $job; echo "job: $(grep 'steps in' "$out/$run.job.log")"
  sleep 12  # a live incident closes after 10 s without a stall
  kill -TERM $agent; wait $agent
  "$bin" report --db "$out/$run.db" 2>&1 | sed -n '/limiter/,/incidents/p' | head -14
  [ -f "$out/$run.events" ] && cat "$out/$run.events"
done
umount "$work/mnt"; losetup -d "$loop"; rm -rf "$work"
rmdir "$cg" "$parent" 2>/dev/null
for db in "$out"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$db"; done
rm -f "$out"/*.db-wal "$out"/*.db-shm
