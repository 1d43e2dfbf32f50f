#!/usr/bin/env bash
# A flood of distinct job ids against the agent (issue 46): N processes of an ordinary user
# (uid 1001) over DURATION_S seconds, each naming its own SLURM_JOB_ID and sending one
# dataloader datagram, then asleep 300 ms (tests/flood_sender.c). Prints, every 30 s, the
# agent's RSS and the size of its /metrics page; halfway through starts root's job and says how
# long it took to appear on /metrics; after the flood, the same figures once its jobs ended.
# The rate is what this shell can start: on 2 busy cores about 50 a second, not N/DURATION_S.
# Usage (root): bench/job_id_flood.sh [STALLWATCH_BINARY] [N] [DURATION_S]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/stallwatch}; n=${2:-100000}; duration=${3:-600}
dir=$(mktemp -d /tmp/stallwatch-flood-XXXXXX); chmod 755 "$dir"
trap 'kill $agent 2>/dev/null; rm -rf "$dir"' EXIT
cc -O2 -o "$dir/sender" "$here/tests/flood_sender.c"
port=$((20000 + RANDOM % 20000)); sock=$dir/sock/d.sock; mkdir -m 755 "$dir/sock"
"$bin" record --db "$dir/f.db" --socket "$sock" --socket-mode 0666 --interval 1s \
  --no-collector.gpu --health-interval 0s --listen "127.0.0.1:$port" 2> "$dir/agent.log" &
agent=$!
sleep 2
figures() { echo "$1 rss $(awk '/VmRSS/ {print $2}' /proc/$agent/status) KiB, /metrics $(curl -s "127.0.0.1:$port/metrics" | wc -c) B"; }
figures "t=0 s, 0 ids:"
per_s=$(( (n + duration - 1) / duration )); started=0; t0=$(date +%s); real_at=
for ((s = 0; s < duration && started < n; s++)); do
  for ((k = 0; k < per_s && started < n; k++)); do
    started=$((started + 1))
    SLURM_JOB_ID=flood$started setpriv --reuid=1001 --regid=1001 --clear-groups "$dir/sender" "$sock" 300 &
  done
  if [ $s -eq $((duration / 2)) ]; then  # root's job, halfway through
    SLURM_JOB_ID=realjob "$dir/sender" "$sock" 30000 & real_at=$(date +%s.%N)
    ( for _ in $(seq 100); do
        curl -s "127.0.0.1:$port/metrics" | grep -q 'training_job="slurm:realjob"' &&
          { echo "root's job on /metrics $(echo "$(date +%s.%N) - $real_at" | bc) s after its start"; break; }
        sleep 0.1
      done ) &
  fi
  [ $((s % 30)) -eq 29 ] && figures "$(( $(date +%s) - t0 )) s, $started ids:"
  sleep "$(echo "($t0 + $s + 1) - $(date +%s.%N)" | bc | sed 's/^-.*/0/')"
done
sleep 35
figures "after the flood (its jobs ended 30 s ago), $started ids:"
echo "agent: $(grep -c . "$dir/agent.log") log lines; $(grep -o 'processes not tracked past [0-9]* jobs' "$dir/agent.log" | head -1)"
curl -s "127.0.0.1:$port/metrics" | grep 'stallwatch_collector_refused_total{collector="jobs"}'
