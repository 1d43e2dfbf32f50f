#!/usr/bin/env bash
# Issue 13's runs on a host with two or more GPUs (root): a synchronous data-parallel job
# (tests/gpu/train_ddp.py under torchrun, one rank per GPU, each rank in a cgroup of its own,
# DataLoader workers reading files from ext4 on a loop device with direct I/O over an image
# on the host's disk), recorded by `stallwatch record` started with no --pid. Runs:
#   healthy    nothing injected;
#   rank-disk  from T_IN to T_OUT rank 1's cgroup gets io.max on the disk under the image;
#   all-disk   the same on every rank's cgroup;
#   rank-cpu   from T_IN to T_OUT rank 1's DataLoader workers are confined to one CPU;
# and each again with -hook appended: the ranks report through stallwatch.watch(). PIN=1 gives
# every rank's DataLoader pin_memory=True (as most scripts set it); LINGER_S makes every rank stay
# that long after its last step before exiting; LAUNCH starts torchrun through it (e.g.
# "stallwatch run --", the zero-code reporting); MODEL_ARGS go to train_ddp.py as they are
# (e.g. "--model resnet152 --size 224": a job the GPUs set the pace of). Every job ends as PyTorch
# ends it, joining its persistent workers: a job lingering at its exit (issue 48).
# Each run leaves in OUT: <run>.db, <run>.window ("T_IN_MS T_OUT_MS RANK", RANK "all" or
# "-"), the agent's and job's logs, <run>.steps (rank 0's step end times), <run>.hook (the
# live hook's calls) and <run>.usage (the agent's CPU seconds and peak RSS).
# Usage: tests/gpu/ddp_runs.sh STALLWATCH_BINARY OUT_DIR [RUNS...]
set -uo pipefail
bin=${1:?}; out=${2:?}; shift 2
runs=${*:-healthy rank-disk all-disk rank-cpu}
LAUNCH=${LAUNCH:-}
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/tests/gpu/common.sh"
RUN_S=${RUN_S:-60}; T_IN=${T_IN:-30}; T_OUT=${T_OUT:-48}
NPROC=${NPROC:-$(nvidia-smi -L | wc -l)}
WORKERS=${WORKERS:-8}; DECODE_US=${DECODE_US:-2000}; THROTTLE_BPS=${THROTTLE_BPS:-4194304}
mkdir -p "$out"
echo "kernel $(uname -r); $NPROC GPUs; cgroup fs: $(stat -fc %T /sys/fs/cgroup)"
work=$(mktemp -d /var/tmp/stallwatch-ddp-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 16000) || { echo "dataset setup failed"; exit 1; }
disk_dev=$(findmnt -no MAJ:MIN -T "$work" | head -1)
echo "dataset on $loop; image on $(df --output=source "$work" | tail -1) ($disk_dev)"
echo "+io +cpu" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
cg=/sys/fs/cgroup/stallwatch-rank

for run in $runs; do
  echo "== run $run"
  case=${run%-hook}; hook=; [ "$case" != "$run" ] && hook=--hook
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$bin" record --db "$out/$run.db" --interval 1s --flush-interval 1s \
      --on-incident "$here/tests/gpu/latency_hook.sh" "$out/$run.hook" 2> "$out/$run.agent.log" &
  agent=$!
  sleep 2
  pids=$work/pids; rm -rf "$pids"; mkdir -p "$pids"
  SW_RANK_CGROUP="$cg{rank}" SW_PID_DIR="$pids" PYTHONPATH="$here/python" OMP_NUM_THREADS=2 \
    $LAUNCH python3 -m torch.distributed.run --standalone --nproc-per-node "$NPROC" "$here/tests/gpu/train_ddp.py" \
      "$work/mnt/train" --seconds "$RUN_S" --workers "$WORKERS" --decode-us "$DECODE_US" $hook \
      $([ "${PIN:-0}" = 1 ] && echo --pin-memory) --linger "${LINGER_S:-0}" ${MODEL_ARGS:-} \
      --step-log "$out/$run.steps" > "$out/$run.job.log" 2>&1 &
  job=$!
  sleep "$T_IN"
  t_in=$(date +%s%3N); scope=-
  case $case in
    rank-disk) echo "$disk_dev rbps=$THROTTLE_BPS" > "${cg}1/io.max"; scope=1 ;;
    all-disk)  for r in $(seq 0 $((NPROC - 1))); do echo "$disk_dev rbps=$THROTTLE_BPS" > "$cg$r/io.max"; done; scope=all ;;
    rank-cpu)  for w in $(pgrep -P "$(cat "$pids/rank1.pid")"); do taskset -acp 0 "$w" > /dev/null; done; scope=1 ;;
  esac
  echo "injected $case at $t_in (rank $scope)"
  sleep $((T_OUT - T_IN))
  t_out=$(date +%s%3N)
  case $case in
    rank-disk) echo "$disk_dev rbps=max" > "${cg}1/io.max" ;;
    all-disk)  for r in $(seq 0 $((NPROC - 1))); do echo "$disk_dev rbps=max" > "$cg$r/io.max"; done ;;
    rank-cpu)  for w in $(pgrep -P "$(cat "$pids/rank1.pid")"); do taskset -acp "0-$(($(nproc) - 1))" "$w" > /dev/null; done ;;
  esac
  echo "$t_in $t_out $scope" > "$out/$run.window"
  wait $job; echo "job exit $?: $(grep -h 'steps in' "$out/$run.job.log" | tr '\n' ' ')"
  echo "$(date +%s%3N)" > "$out/$run.exit"  # the job's exit, its workers joined
  sleep 12  # the live incident closes after 10 s without a stall
  agent_usage $agent "$out/$run.usage"
  kill -TERM $agent; wait $agent
  grep -E "collector (jobs|gpu)|recorded|gpu: " "$out/$run.agent.log"
  "$bin" incidents --db "$out/$run.db" --recompute 2>&1 | head -20
  echo "injected window (epoch ms): $t_in .. $t_out, rank $scope"
  hook_latency "$out/$run.hook" "$t_in"
  for r in $(seq 0 $((NPROC - 1))); do rmdir "$cg$r" 2>/dev/null; done
done
umount "$work/mnt"; losetup -d "$loop"; rm -rf "$work"
for db in "$out"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$db"; done
rm -f "$out"/*.db-wal "$out"/*.db-shm
