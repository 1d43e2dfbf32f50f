#!/usr/bin/env bash
# Issue 7's runs on the GPU host (root): one training job (ResNet-18, DataLoader workers
# reading files from ext4 on a loop device with direct I/O over an image on the host's disk)
# recorded by `stallwatch record` with no --pid, three times:
#   healthy  nothing injected;
#   disk     from T_IN to T_OUT the job's cgroup gets io.max on the disk holding the image
#            (MAJ:MIN rbps=...), so the loop device really slows down under the job;
#   cpu      from T_IN to T_OUT the DataLoader workers are confined to one CPU (taskset);
#   linger   nothing injected; after training the job stays LINGER_S (40) with its model on
#            the GPU and its workers idle before it exits (a job winding down); the window
#            is from its last step to its exit.
#   cpumax   from T_IN to T_OUT the job's cgroup gets cpu.max CPU_QUOTA (a CPU quota);
#   checkpoint  at T_IN the job saves a CKPT_GB checkpoint to the dataset's disk and syncs;
#            the window is the save's start and end as the job printed them.
#   ckptslow the same to a second disk (a loop device over an image of its own) whose writes
#            are slow for the job (io.max wbps=CKPT_BPS on it, writeback charged to the job's
#            cgroup with the memory controller on);
#   neighbour the job and a neighbour share the disk under a cap (io.max rbps=SHARED_BPS on
#            the parent of their two cgroups, as a volume's provisioned throughput); from T_IN to
#            T_OUT the neighbour reads the same disk hard (4 direct-I/O readers);
#   neighbourproc the same readers, but started in the job's own cgroup (a sidecar sharing a
#            container's cgroup): no other cgroup shows their bytes, so processes must;
#   neighbourcpu from T_IN to T_OUT a neighbour cgroup burns all CPUs but 10 (the job's need):
#            the job is unaffected, and there must be no incident;
#   hang     at T_IN the job's training loop blocks on a lock nobody releases (every thread
#            asleep) for T_OUT - T_IN s, then trains on; the agent holds an idle stall for
#            --idle-stall-open-after IDLE_OPEN (30s here, 2m by default) before it reports it;
#   eval     at T_IN the job evaluates for T_OUT - T_IN s (eval mode, its own loader, no steps
#            reported), then trains on; the window is the evaluation as the job printed it.
#   parentlimit from T_IN to T_OUT the job's PARENT cgroup (a tenant's, as a Kubernetes pod or a
#            systemd slice sets it) gets io.max on the dataset's loop device (rbps=PARENT_BPS);
#   stopped  from T_IN to T_OUT the DataLoader workers are stopped (SIGSTOP, then SIGCONT): a
#            hang whose workers are in state T while the main process waits for them;
#   fusehang the job reads its files through a FUSE filesystem (swslowfs, SWSLOWFS=its binary);
#            from T_IN to T_OUT its daemon is stopped: reads wait for a daemon that answers nothing;
#   early    10 s after the job's first step (its step log's first line) its cgroup gets io.max
#            on the disk under the image for T_OUT - T_IN s: a stall before the baseline is warm.
# Each run leaves OUT/<run>.db, OUT/<run>.window (injected start/end, epoch ms) and the
# agent's and job's logs, OUT/<run>.hook (when the live hook ran, and what it was told) and
# OUT/<run>.usage (the agent's CPU seconds and peak RSS over the run). A run named disk2,
# disk3, ... repeats the disk case (detection latency over repeated runs); a name ending in
# -nohook runs the job without stallwatch.watch() (judged by its GPU alone).
# Usage: tests/gpu/stall_runs.sh STALLWATCH_BINARY OUT_DIR [RUNS...]
set -uo pipefail
bin=${1:?}; out=${2:?}; shift 2
runs=${*:-healthy disk cpu}
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/tests/gpu/common.sh"
# The job is found once its CUDA context exists (~15 s after start on an H200): inject late
# enough that the detector has its 10 healthy intervals of baseline first.
RUN_S=${RUN_S:-75}; T_IN=${T_IN:-30}; T_OUT=${T_OUT:-50}
WORKERS=${WORKERS:-8}; DECODE_US=${DECODE_US:-600}; THROTTLE_BPS=${THROTTLE_BPS:-4194304}
mkdir -p "$out"
echo "kernel $(uname -r); cgroup fs: $(stat -fc %T /sys/fs/cgroup)"
work=$(mktemp -d /var/tmp/stallwatch-runs-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 16000) || { echo "dataset setup failed"; exit 1; }
backing=$(df --output=source "$work" | tail -1)
disk_dev=$(findmnt -no MAJ:MIN -T "$work" | head -1)
echo "dataset on $loop; image on $backing ($disk_dev)"
# The job and its neighbour are two cgroups under one parent (which holds no process itself).
parent=/sys/fs/cgroup/stallwatch
cg=$parent/job; ncg=$parent/neighbour
echo "+io +cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
mkdir -p "$parent"
echo "+io +cpu +memory" > "$parent/cgroup.subtree_control" 2>/dev/null || true
mkdir -p "$cg" "$ncg"
cat "$parent/cgroup.subtree_control"
# What the neighbour reads: 2 GiB of real blocks on the same disk as the dataset's image.
head -c 2G /dev/zero > "$work/neighbour.bin"
# The second disk, for ckptslow: an ext4 image of its own on a loop device.
truncate -s 6G "$work/ckpt.img"; mkfs.ext4 -q -F "$work/ckpt.img"
ckpt_loop=$(losetup -f --show "$work/ckpt.img"); mkdir -p "$work/ckpt"; mount "$ckpt_loop" "$work/ckpt"
ckpt_dev=$(lsblk -ndo MAJ:MIN "$ckpt_loop" | tr -d ' ')
echo "checkpoint disk $ckpt_loop ($ckpt_dev) at $work/ckpt"
burners=()

# fusectl, where a FUSE mount's queue is read (systemd mounts it on most hosts).
mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections
# The FUSE view of the dataset, for fusehang.
mkdir -p "$work/slow"; echo 0 > "$work/delay"
if [ -n "${SWSLOWFS:-}" ] && "$SWSLOWFS" "$work/mnt/train" "$work/slow" --delay-file "$work/delay" \
     -o fsname=swslowfs,subtype=swslowfs,allow_other; then
  echo "swslowfs at $work/slow"
fi
loop_dev=$(lsblk -ndo MAJ:MIN "$loop" | tr -d ' ')

for run in $runs; do
  echo "== run $run"
  case_name=${run%%-*}; case_name=${case_name%%[0-9]*}
  hook_flag=; [ "${run%-nohook}" != "$run" ] && hook_flag=--no-hook
  linger_flag=; [ "$case_name" = linger ] && linger_flag="--linger ${LINGER_S:-40}"
  [ "$case_name" = checkpoint ] &&
    linger_flag="--checkpoint-at $((T_IN - 15)) --checkpoint-gb ${CKPT_GB:-3} --checkpoint-dir $work"
  [ "$case_name" = ckptslow ] &&
    linger_flag="--checkpoint-at $((T_IN - 15)) --checkpoint-gb ${CKPT_GB:-3} --checkpoint-dir $work/ckpt"
  [ "$case_name" = eval ] && linger_flag="--eval-at $((T_IN - 15)) --eval-seconds $((T_OUT - T_IN))"
  [ "$case_name" = hang ] && linger_flag="--hang-at $((T_IN - 15)) --hang-seconds $((T_OUT - T_IN))"
  idle_flag=; [ "$case_name" = hang ] && idle_flag="--idle-stall-open-after ${IDLE_OPEN:-30s}"
  echo "$disk_dev rbps=max wbps=max" > "$parent/io.max"
  echo "$ckpt_dev rbps=max wbps=max" > "$cg/io.max"
  case $case_name in
    neighbour|neighbourproc) echo "$disk_dev rbps=${SHARED_BPS:-314572800}" > "$parent/io.max"; echo "shared cap: $(cat "$parent/io.max")" ;;
    ckptslow) echo "$ckpt_dev wbps=${CKPT_BPS:-104857600}" > "$cg/io.max"; echo "checkpoint disk: $(cat "$cg/io.max")" ;;
  esac
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$bin" record --db "$out/$run.db" --interval 1s --flush-interval 1s \
      $idle_flag \
      --on-incident "$here/tests/gpu/latency_hook.sh" "$out/$run.hook" 2> "$out/$run.agent.log" &
  agent=$!
  sleep 2
  # The job starts inside its own cgroup.
  data=$work/mnt/train; [ "$case_name" = fusehang ] && data=$work/slow
  rm -f "$out/$run.steps"
  ( echo $BASHPID > "$cg/cgroup.procs"; exec env PYTHONPATH="$here/python" python3 "$here/tests/gpu/train_job.py" \
      "$data" --seconds "$RUN_S" --workers "$WORKERS" --decode-us "$DECODE_US" $hook_flag $linger_flag --step-log "$out/$run.steps" ) > "$out/$run.job.log" 2>&1 &
  job=$!
  if [ "$case_name" = early ]; then  # 10 s after the first step, whenever the job got there
    for _ in $(seq 600); do [ -s "$out/$run.steps" ] && break; sleep 0.1; done
    sleep 10
  else
    sleep "$T_IN"
  fi
  t_in=$(date +%s%3N)
  case $case_name in
    disk|early) echo "$disk_dev rbps=$THROTTLE_BPS" > "$cg/io.max"; echo "io.max: $(cat "$cg/io.max")" ;;
    parentlimit) echo "$loop_dev rbps=${PARENT_BPS:-15728640}" > "$parent/io.max"; echo "parent io.max: $(cat "$parent/io.max")" ;;
    stopped) workers=$(pgrep -P "$(pgrep -f -o train_job.py)"); kill -STOP $workers; echo "stopped workers: $(echo $workers | wc -w)" ;;
    fusehang) kill -STOP "$(pgrep -x swslowfs)"; echo "swslowfs stopped" ;;
    cpu)  for w in $(pgrep -P "$(pgrep -f -o train_job.py)"); do taskset -acp 0 "$w" > /dev/null; done
          echo "workers on CPU 0: $(pgrep -P "$(pgrep -f -o train_job.py)" | tr '\n' ' ')" ;;
    cpumax) echo "${CPU_QUOTA:-50000 100000}" > "$cg/cpu.max"; echo "cpu.max: $(cat "$cg/cpu.max")" ;;
    neighbour|neighbourproc) into=$ncg; [ "$case_name" = neighbourproc ] && into=$cg
               for k in 1 2 3 4; do
                 ( echo $BASHPID > "$into/cgroup.procs"
                   exec bash -c "while :; do dd if='$work/neighbour.bin' of=/dev/null bs=1M iflag=direct status=none; done" ) &
                 burners+=($!)
               done; echo "neighbour readers: ${burners[*]} in $into" ;;
    neighbourcpu) for k in $(seq $(( $(nproc) - 10 ))); do
                 ( echo $BASHPID > "$ncg/cgroup.procs"; exec python3 -c "while True: pass" ) &
                 burners+=($!)
               done; echo "neighbour burners: ${#burners[@]} in $ncg" ;;
  esac
  sleep $((T_OUT - T_IN))
  t_out=$(date +%s%3N)
  case $case_name in
    disk|early) echo "$disk_dev rbps=max" > "$cg/io.max" ;;
    parentlimit) echo "$loop_dev rbps=max" > "$parent/io.max" ;;
    stopped) kill -CONT $workers ;;
    fusehang) kill -CONT "$(pgrep -x swslowfs)" ;;
    cpu)  for w in $(pgrep -P "$(pgrep -f -o train_job.py)"); do taskset -acp "0-$(($(nproc) - 1))" "$w" > /dev/null; done ;;
    cpumax) echo "max 100000" > "$cg/cpu.max" ;;
    neighbour|neighbourproc|neighbourcpu) for p in "${burners[@]}"; do kill "$p" 2>/dev/null; done
               # The loops first, then the reads they started (once a loop is gone its dd
               # belongs to init: the first runs went on reading up to 14 s past T_OUT).
               pkill -f "dd if=$work/neighbour.bin" 2>/dev/null
               wait "${burners[@]}" 2>/dev/null; burners=() ;;
  esac
  echo "$t_in $t_out" > "$out/$run.window"
  wait $job; echo "job exit $?: $(tail -1 "$out/$run.job.log")"
  if [ "$case_name" = linger ]; then  # the window: from the last step to the exit
    last_step=$(awk '/ end / {print $NF}' "$out/$run.job.log"); exit_s=$(awk '/exiting/ {print $NF}' "$out/$run.job.log")
    python3 -c "import sys; print(round(float(sys.argv[1]) * 1000), round(float(sys.argv[2]) * 1000))" \
      "$last_step" "$exit_s" > "$out/$run.window"
  fi
  if [ "$case_name" = checkpoint ] || [ "$case_name" = ckptslow ]; then  # the save, as the job timed it
    awk '/checkpoint .* from/ {printf "%d %d\n", $(NF-2) * 1000, $NF * 1000}' "$out/$run.job.log" > "$out/$run.window"
    rm -f "$work/checkpoint.pt" "$work/ckpt/checkpoint.pt"
  fi
  if [ "$case_name" = hang ]; then  # the hang, as the job timed it
    awk '/hang from/ {printf "%d %d\n", $(NF-2) * 1000, $NF * 1000}' "$out/$run.job.log" > "$out/$run.window"
  fi
  if [ "$case_name" = eval ]; then  # the evaluation, as the job timed it
    awk '/eval from/ {printf "%d %d\n", $(NF-2) * 1000, $NF * 1000}' "$out/$run.job.log" > "$out/$run.window"
  fi
  sleep 12  # the live incident closes after 10 s without a stall
  agent_usage $agent "$out/$run.usage"
  kill -TERM $agent; wait $agent
  grep -E "collector (jobs|gpu)|recorded" "$out/$run.agent.log"
  "$bin" incidents --db "$out/$run.db" --recompute 2>&1 | head -20
  echo "injected window (epoch ms): $t_in .. $t_out"
  hook_latency "$out/$run.hook" "$t_in"
done
umount "$work/slow" 2>/dev/null
umount "$work/mnt" "$work/ckpt"; losetup -d "$loop" "$ckpt_loop"; rm -rf "$work"
rmdir "$cg" "$ncg" "$parent" 2>/dev/null
# One file back: the device tool returns at most 8. WAL folded into each DB first.
for db in "$out"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$db"; done
rm -f "$out"/*.db-wal "$out"/*.db-shm
tar -C "$out" -czf "$out/../runs.tar.gz" . && echo "packed $(du -h "$out/../runs.tar.gz" | cut -f1)"
