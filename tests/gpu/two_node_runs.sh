#!/usr/bin/env bash
# Issue 14's runs on a host with two GPUs (root): a two-node job simulated on one host. Two
# torchrun launchers (--nnodes 2, one process each, static rendezvous on localhost, node k on
# GPU k), each rank in a cgroup of its own, DataLoader workers reading files from ext4 on a loop
# device with direct I/O over an image on the host's disk (tests/gpu/train_ddp.py). Each "node"
# has its own agent, restricted to its GPU (--gpu K) and its rank's cgroup (--cgroup), with its
# own DB and dataloader socket. Runs:
#   healthy     nothing injected;
#   node1-disk  from T_IN to T_OUT node 1's rank cgroup gets io.max on the disk under the image.
# Each run leaves in OUT: <run>.node<K>.db (each agent's recording), <run>.node<K>.export.db
# (`stallwatch export --run-id` of it), <run>.fleet.txt / .json (`stallwatch report` over the two
# exports), <run>.window ("T_IN_MS T_OUT_MS NODE"), the agents' and launchers' logs, <run>.steps.
# Usage: tests/gpu/two_node_runs.sh STALLWATCH_BINARY OUT_DIR [RUNS...]
set -uo pipefail
bin=${1:?}; out=${2:?}; shift 2
runs=${*:-healthy node1-disk}
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/tests/gpu/common.sh"
RUN_S=${RUN_S:-60}; T_IN=${T_IN:-30}; T_OUT=${T_OUT:-48}
WORKERS=${WORKERS:-8}; DECODE_US=${DECODE_US:-2000}; THROTTLE_BPS=${THROTTLE_BPS:-4194304}
mkdir -p "$out"
echo "kernel $(uname -r); $(nvidia-smi -L | wc -l) GPUs; cgroup fs: $(stat -fc %T /sys/fs/cgroup)"
work=$(mktemp -d /var/tmp/stallwatch-2n-XXXXXX)
loop=$("$here/tests/gpu/make_dataset.sh" "$work/data.img" "$work/mnt" 16000) || { echo "dataset setup failed"; exit 1; }
disk_dev=$(findmnt -no MAJ:MIN -T "$work" | head -1)
echo "dataset on $loop; image on $(df --output=source "$work" | tail -1) ($disk_dev)"
echo "+io +cpu" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
cg=/sys/fs/cgroup/stallwatch-rank
port=29533

for run in $runs; do
  echo "== run $run"
  sync; echo 3 > /proc/sys/vm/drop_caches
  agents=()
  for k in 0 1; do
    mkdir -p "$cg$k"; mkdir -p -m 0755 "$work/sw$k"
    "$bin" record --db "$out/$run.node$k.db" --interval 1s --flush-interval 1s --gpu "$k" \
        --cgroup "$cg$k" --socket "$work/sw$k/dataloader.sock" 2> "$out/$run.node$k.agent.log" &
    agents+=($!)
  done
  sleep 2
  launchers=()
  port=$((port + 1))
  for k in 0 1; do
    step_log=; [ "$k" = 0 ] && step_log="--step-log $out/$run.steps"
    SW_RANK_CGROUP="$cg{rank}" CUDA_VISIBLE_DEVICES=$k OMP_NUM_THREADS=2 PYTHONPATH="$here/python" \
      python3 -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --node-rank "$k" \
        --master-addr 127.0.0.1 --master-port "$port" --rdzv-id "sw2n-$run" \
        "$here/tests/gpu/train_ddp.py" "$work/mnt/train" --seconds "$RUN_S" --workers "$WORKERS" \
        --decode-us "$DECODE_US" $step_log > "$out/$run.node$k.job.log" 2>&1 &
    launchers+=($!)
  done
  sleep "$T_IN"
  t_in=$(date +%s%3N); scope=-
  if [ "$run" = node1-disk ]; then echo "$disk_dev rbps=$THROTTLE_BPS" > "${cg}1/io.max"; scope=1; fi
  echo "injected $run at $t_in (node $scope)"
  sleep $((T_OUT - T_IN))
  t_out=$(date +%s%3N)
  [ "$run" = node1-disk ] && echo "$disk_dev rbps=max" > "${cg}1/io.max"
  echo "$t_in $t_out $scope" > "$out/$run.window"
  for k in 0 1; do wait "${launchers[$k]}"; echo "node $k launcher exit $?: $(grep -h 'steps in' "$out/$run.node$k.job.log" | tr '\n' ' ')"; done
  sleep 3
  for k in 0 1; do
    agent_usage "${agents[$k]}" "$out/$run.node$k.usage"
    kill -TERM "${agents[$k]}"; wait "${agents[$k]}"
    grep -E "collector (jobs|gpu)|recorded|gpu: " "$out/$run.node$k.agent.log"
    "$bin" jobs --db "$out/$run.node$k.db" 2>&1 | head -5
    "$bin" export --db "$out/$run.node$k.db" --run-id "sw2n-$run" -o "$out/$run.node$k.export.db"
    echo "-- node $k's own incidents"
    "$bin" incidents --db "$out/$run.node$k.export.db" --recompute 2>&1 | head -12
  done
  "$bin" report --db "$out/$run.node0.export.db" --db "$out/$run.node1.export.db" | tee "$out/$run.fleet.txt"
  "$bin" report --db "$out/$run.node0.export.db" --db "$out/$run.node1.export.db" --json > "$out/$run.fleet.json"
  "$bin" report --db "$out/$run.node0.export.db" --db "$out/$run.node1.export.db" --html "$out/$run.fleet.html"
  echo "injected window (epoch ms): $t_in .. $t_out, node $scope"
  for k in 0 1; do rmdir "$cg$k" 2>/dev/null; done
done
umount "$work/mnt"; losetup -d "$loop"; rm -rf "$work"
for db in "$out"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$db"; done
rm -f "$out"/*.db-wal "$out"/*.db-shm
