#!/usr/bin/env bash
# The wait sampler's cost (collectors/jobs/wait_sampler.h): the whole agent's CPU beside one job
# whose main thread waits on a pipe half its time (as a loop waits for batches), with the
# sampler at 10 Hz and off, ROUNDS pairs interleaved, SECONDS each; and the sampler thread's
# own CPU (its task, named sw-waits). Prints CPU milliseconds per second of each run.
# Usage: bench/wait_sampler_cost.sh STALLWATCH_BINARY [SECONDS] [ROUNDS]
set -euo pipefail
bin=${1:?}; seconds=${2:-30}; rounds=${3:-3}
tmp=$(mktemp -d); trap 'kill $job 2>/dev/null; rm -rf "$tmp"' EXIT
python3 -c "
import os, select, time, threading
r, w = os.pipe()
def writer():
    while True:
        time.sleep(0.1); os.write(w, b'x')
threading.Thread(target=writer, daemon=True).start()
p = select.poll(); p.register(r, select.POLLIN)
while True:
    p.poll(); os.read(r, 1)
    e = time.perf_counter() + 0.05
    while time.perf_counter() < e: pass
" & job=$!
# CPU from schedstat (ns on a CPU), summed over the agent's threads: stat's clock ticks are 10 ms.
task_ms() { awk '{printf "%.3f", $1 / 1e6}' "$1/schedstat"; }
agent_ms() { local sum=0; for t in /proc/$1/task/*; do sum=$(echo "$sum + $(task_ms "$t")" | bc -l); done; echo "$sum"; }
for round in $(seq "$rounds"); do
  for rate in 10 0; do
    rm -f "$tmp/r.db"*
    "$bin" record --db "$tmp/r.db" --pid "$job" --wait-sample-hz "$rate" --duration "${seconds}s" \
      --no-collector.gpu 2> "$tmp/log" &
    agent=$!
    sleep $((seconds - 1))
    sampler=0
    for t in /proc/$agent/task/*; do
      [ "$(cat "$t/comm")" = sw-waits ] && sampler=$(task_ms "$t")
    done
    total=$(agent_ms "$agent")
    wait $agent
    echo "round $round sampler ${rate} Hz: agent $(echo "$total / ($seconds - 1)" | bc -l | cut -c1-5) ms/s, sampler thread $(echo "$sampler / ($seconds - 1)" | bc -l | cut -c1-5) ms/s"
  done
done
