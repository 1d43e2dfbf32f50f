#!/usr/bin/env bash
# Times `stallwatch report` over 7 days of one-second samples of one job on 8 GPUs, on a host
# with 16 block devices (tests/synthetic_db.py; a disk-slow stall in the middle), and prints
# the median of 3 runs of the text report and of --json. Target (issue 5): at most 2 s.
# Usage: bench/report_week.sh [BUILD_DIR]   (the DB, ~1.5 GB, is made under /var/tmp and removed)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/stallwatch
db=$(mktemp -u /var/tmp/stallwatch-week-XXXXXX.db)
trap 'rm -f "$db" "$db-wal" "$db-shm"' EXIT
start=$(date +%s.%N)
python3 "$here/tests/synthetic_db.py" "$db" --stallwatch "$bin" --seconds 604800 --gpus 8 --devices 16 \
  --stall disk-slow --stall-at 302400 --stall-for 60
echo "generated in $(echo "$(date +%s.%N) - $start" | bc) s: $(du -h "$db" | cut -f1), $(sqlite3 "$db" \
  'SELECT (SELECT count(*) FROM gpu_samples) || " GPU rows, " || (SELECT count(*) FROM disk_samples) || " disk rows"')"
median() { sort -n | sed -n 2p; }
for mode in text json; do
  times=$(for run in 1 2 3; do
    s=$(date +%s.%N)
    if [ $mode = json ]; then "$bin" report --db "$db" --json > /dev/null; else "$bin" report --db "$db" > /dev/null; fi
    echo "$(date +%s.%N) - $s" | bc
  done)
  echo "report ($mode): runs $(echo $times | tr '\n' ' ') s; median $(echo "$times" | median) s"
done
"$bin" report --db "$db" | head -8
