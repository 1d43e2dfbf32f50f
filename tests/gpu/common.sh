# Shared by the GPU-host run scripts (sourced).

# The agent's own cost over a run: CPU seconds (utime+stime), wall seconds, peak RSS.
agent_usage() {  # PID FILE
  echo "cpu_s $(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/hz}' "/proc/$1/stat")" \
       "wall_s $(( $(date +%s) - $(stat -c %Y "/proc/$1") ))" \
       "$(grep VmHWM "/proc/$1/status" | tr -s ' ')" > "$2"
  cat "$2"
}

# Live detection latency: when the --on-incident hook ran for each event (latency_hook.sh's
# lines), against the injected start and the stall's start as the recording saw it.
hook_latency() {  # HOOK_FILE T_IN_MS
  [ -f "$1" ] || return 0
  python3 - "$1" "$2" <<'PY'
import json, sys
t_in = int(sys.argv[2])
for line in open(sys.argv[1]):
    at, body = line.split(" ", 1)
    e = json.loads(body)
    straggler = (e.get("straggler") or {}).get("rank", "-")
    print(f"hook {e['event']:6s} {e['class']} {e['device'] or '-'} straggler rank {straggler}: "
          f"ran {(int(at) - t_in) / 1000:+.2f} s after injection, "
          f"{(int(at) - e['start_ms']) / 1000:+.2f} s after the recorded stall start")
PY
}
