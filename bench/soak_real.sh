#!/usr/bin/env bash
# A real recording of MINUTES (default 30) on this host, with the live half on (endpoint
# scraped every 15 s, correlator, health thread): RSS and open descriptors of the agent
# sampled every minute, and the DB's size at the end.
# Usage: bench/soak_real.sh [MINUTES] [STALLWATCH_BINARY]
set -euo pipefail
minutes=${1:-30}
bin=${2:-build/stallwatch}
dir=$(mktemp -d /var/tmp/stallwatch-soak-XXXXXX)
port=$((20000 + RANDOM % 20000))
"$bin" record --db "$dir/sw.db" --interval 1s --listen "127.0.0.1:$port" --health-interval 1m \
  --socket "$dir/dl.sock" --duration "${minutes}m" 2> "$dir/agent.log" &
agent=$!
sleep 2
echo "minute rss_kb fds db_bytes"
for ((m = 0; m <= minutes; m++)); do
  [ -d /proc/$agent ] || break
  rss=$(awk '/VmRSS/ {print $2}' /proc/$agent/status)
  fds=$(ls /proc/$agent/fd | wc -l)
  size=$(du -cb "$dir"/sw.db* | tail -1 | cut -f1)
  echo "$m $rss $fds $size"
  for ((s = 0; s < 4 && m < minutes; s++)); do
    curl -s "http://127.0.0.1:$port/metrics" > /dev/null || true
    sleep 15
  done
done
wait $agent || true
echo "peak: $(grep -h 'recorded' "$dir/agent.log" | tail -1)"
python3 - "$dir/sw.db" <<'PY'
import os, sqlite3, sys
db = sys.argv[1]
c = sqlite3.connect(db)
n, t0, t1 = c.execute("select count(*), min(ts_ms), max(ts_ms) from disk_samples").fetchone()
devices = c.execute("select count(distinct device_id) from disk_samples").fetchone()[0]
size = os.path.getsize(db)
hours = (t1 - t0) / 3.6e6
print(f"db {size} bytes for {hours * 60:.1f} min, {devices} devices: {size / hours * 24 / 1e6:.1f} MB/day at 1 s")
PY
rm -rf "$dir"
