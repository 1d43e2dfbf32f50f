#!/usr/bin/env bash
# Installs what is missing (the tests' tools too), builds everything, and runs the whole test
# suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the build compiles against first; the tests' own tools (a browser, Prometheus, clang-tidy,
# ...: most of the download on a fresh machine) install while it builds.
scripts/install-deps.sh --dev-build
log=$(mktemp /tmp/stallwatch-test-deps.XXXXXX.log)
scripts/install-deps.sh --dev > "$log" 2>&1 &
installing=$!
# A failed build still waits for the install: apt must not hold its lock against a rerun.
if ! scripts/build.sh --dev; then
  wait "$installing" || true
  exit 1
fi
if ! wait "$installing"; then
  cat "$log" >&2
  exit 1
fi
grep -E '^install-deps: (all|done|[0-9]+ of)' "$log" || true
rm -f "$log"
cd "${BUILD_DIR:-build}"
# Twice as many tests as cores: most end-to-end tests spend their time waiting on an agent's
# intervals, not computing (on 2 cores: 469 s at -j2, 292 s at -j4, the CPU 82 % busy).
ctest --output-on-failure --timeout 300 -j "$(( $(nproc) * 2 ))"
