#!/usr/bin/env bash
# Issue 33 on a host whose io controller is cgroup v2's (the GPU host; this project's CI machine
# has it on v1): a job reporting through the hook reads a loop device from its own cgroup
# while io.max limits its reads, and a neighbour cgroup reads the same device meanwhile. The
# agent records with --collector.io_latency; the report must tell the job's per-I/O latency
# from the neighbour's. Run from the repository root with .carry built (tests/gpu/bundle.sh);
# writes the recording, the reports and a log under $OUT.
#   OUT=/tmp/out tests/gpu/io_latency_runs.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
SW=${SW:-$PWD/.carry/sw}
OUT=${OUT:-/tmp/io_latency_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
cg=/sys/fs/cgroup
grep -qw io "$cg/cgroup.controllers" || { echo "no cgroup v2 io controller here"; exit 2; }
work=$(mktemp -d /tmp/swio.XXXXXX)
mount -t tmpfs -o size=700m tmpfs "$work"
truncate -s 400M "$work/img" && mkfs.ext4 -q -F "$work/img"
loop=$(losetup -f --show --direct-io=off "$work/img")
mkdir "$work/data" && mount "$loop" "$work/data"
dd if=/dev/urandom of="$work/data/samples" bs=1M count=256 status=none && sync
majmin=$(cat "/sys/block/$(basename "$loop")/dev")
echo "loop $loop ($majmin) on tmpfs"
echo +io > "$cg/cgroup.subtree_control" 2>/dev/null || true
mkdir -p "$cg/swjob" "$cg/swneighbour"
sockets=$(mktemp -d /tmp/swio-run.XXXXXX)  # 0700: the tmpfs is writable by others
agent= job= neighbour=
cleanup() {
  kill "$agent" "$job" "$neighbour" 2>/dev/null; wait "$agent" "$job" "$neighbour" 2>/dev/null
  echo "$majmin rbps=max" > "$cg/swjob/io.max" 2>/dev/null
  rmdir "$cg/swjob" "$cg/swneighbour" 2>/dev/null
  umount "$work/data"; losetup -d "$loop"; umount "$work"; rmdir "$work"; rm -rf "$sockets"
}
trap cleanup EXIT
"$SW" record --db "$OUT/sw.db" --no-collector.gpu --collector.io_latency --health-interval 0s \
  --socket "$sockets/dl.sock" > "$OUT/agent.out" 2>&1 &
agent=$!
sleep 2
# The job: 4 threads read 32 random 4 KiB samples a step with O_DIRECT, then 2 ms of compute.
sh -c "echo \$\$ > $cg/swjob/cgroup.procs && exec env PYTHONPATH=$PWD/python STALLWATCH_SOCKET=$sockets/dl.sock \
  python3 tests/io_latency_job.py 45 $work/data/samples" &
job=$!
sleep 15
t0=$(date +%s%3N)
echo "$majmin rbps=1048576" > "$cg/swjob/io.max"   # the job's reads: 1 MiB/s, 256 samples/s
# The neighbour: 64 KiB direct reads of the whole device, again and again, for the window.
sh -c "echo \$\$ > $cg/swneighbour/cgroup.procs && exec timeout 15 sh -c 'while :; do dd if=$loop of=/dev/null bs=64k iflag=direct status=none; done'" &
neighbour=$!
sleep 15
wait "$neighbour"
echo "$majmin rbps=max" > "$cg/swjob/io.max"
t1=$(date +%s%3N)
echo "limited and neighbour from $t0 to $t1"
wait "$job"
sleep 2
kill -TERM "$agent"; wait "$agent"
"$SW" report --db "$OUT/sw.db" > "$OUT/report.txt"
"$SW" report --db "$OUT/sw.db" --json > "$OUT/report.json"
"$SW" report --db "$OUT/sw.db" --html "$OUT/report.html" --force
echo "t0 $t0 t1 $t1" > "$OUT/window.txt"
sed -n '/incidents/,/devices/p' "$OUT/report.txt"
