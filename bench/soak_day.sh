#!/usr/bin/env bash
# A day of simulated time through the live half, fast-forwarded: a synthetic recording of one
# job on 8 GPUs over 24 h of one-second samples on a host with 16 devices (a disk-slow stall
# in it) replayed through the correlator, the hook and the metrics endpoint as fast as they
# go. The replaying process's RSS (and its anonymous part: the file-backed rest is the
# memory-mapped recording being read) and open descriptors are sampled every second.
# Usage: bench/soak_day.sh [STALLWATCH_BINARY]
set -euo pipefail
bin=${1:-build/stallwatch}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /var/tmp/stallwatch-soakday-XXXXXX)
python3 "$here/tests/synthetic_db.py" "$dir/day.db" --stallwatch "$bin" --seconds 86400 --gpus 8 --devices 16 \
  --stall disk-slow --stall-at 43200 --stall-for 120
# 1000x: the day in 86 s, so that the curves have points.
"$bin" replay --db "$dir/day.db" --speed 1000 --on-incident /bin/true --listen 127.0.0.1:0 > "$dir/events" 2> "$dir/replay.log" &
pid=$!
echo "second rss_kb rss_anon_kb fds"
s=0
while [ -d /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status 2>/dev/null; do
  awk -v s=$s -v fds="$(ls /proc/$pid/fd 2>/dev/null | wc -l)" \
    '/^VmRSS/ {rss=$2} /^RssAnon/ {anon=$2} END {print s, rss, anon, fds}' /proc/$pid/status 2>/dev/null || true
  sleep 1
  s=$((s + 1))
done
wait $pid
tail -3 "$dir/replay.log"
echo "events: $(wc -l < "$dir/events")"
rm -rf "$dir"
