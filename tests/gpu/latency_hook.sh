#!/bin/sh
# stallwatch --on-incident hook for the GPU runs: appends "EPOCH_MS EVENT_JSON" to $1, so
# that the detection latency can be read against the injected window afterwards.
now=$(date +%s%3N)
printf '%s %s\n' "$now" "$(cat)" >> "$1"
