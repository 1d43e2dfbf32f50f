#!/usr/bin/env bash
# The HTML report of three committed recordings, each as a page and a screenshot taken by
# headless Chromium: a single-GPU disk stall, an io-throttled job (a read limit on its parent
# cgroup from the start) and a DDP job whose rank 1 starved. For looking at the pages before
# and after a change to them (issue 44); docs/report-h200-disk-slow.png, report-h200x2-ddp-
# straggler.png and report-h100-io-throttled.png are its single-gpu, ddp and io-throttled shots.
# Usage: scripts/report_screenshots.sh STALLWATCH_BINARY OUT_DIR
set -euo pipefail
bin=$(realpath "$1")
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
browser=$(command -v chromium || command -v chromium-browser)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for spec in single-gpu:h200-stall-disk.db io-throttled:h100-lm/parentlimit.db ddp:h200x2-ddp-rank-disk.db; do
  name=${spec%%:*}
  db=$root/tests/fixtures/recordings/${spec#*:}
  cp "$db" "$tmp/$name.db"
  for s in -wal -shm; do [ -e "$db$s" ] && cp "$db$s" "$tmp/$name.db$s"; done
  TZ=UTC "$bin" --log-level off report --db "$tmp/$name.db" --html "$out/$name.html" --force
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile" \
    --screenshot="$out/$name.png" --window-size=1200,1400 "file://$(realpath "$out/$name.html")" \
    > /dev/null 2>&1
  echo "$out/$name.png"
done
