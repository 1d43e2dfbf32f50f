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
# STALLWATCH_BESIDE_TESTS: a command to run beside the tests at idle priority (SCHED_IDLE: it
# gets only what the tests leave), waited for at the end; .ci/run builds the sanitizers' trees
# so. The tests leave about a quarter of the CPU unused while they wait on agents' intervals.
beside=""
if [ -n "${STALLWATCH_BESIDE_TESTS:-}" ]; then
  beside_log=$(mktemp /tmp/stallwatch-beside-tests.XXXXXX.log)
  chrt --idle 0 nice -n 19 bash -c "$STALLWATCH_BESIDE_TESTS" > "$beside_log" 2>&1 &
  beside=$!
fi
wait_beside() {
  [ -n "$beside" ] || return 0
  if ! wait "$beside"; then
    cat "$beside_log" >&2
    echo "test.sh: beside the tests, '$STALLWATCH_BESIDE_TESTS' failed" >&2
    return 1
  fi
  cat "$beside_log"
  rm -f "$beside_log"
}
cd "${BUILD_DIR:-build}"
# Twice as many tests as cores: most end-to-end tests spend their time waiting on an agent's
# intervals, not computing (on 2 cores: 469 s at -j2, 292 s at -j4, the CPU 82 % busy).
if ! ctest --output-on-failure --timeout 300 -j "$(( $(nproc) * 2 ))"; then
  wait_beside || true
  exit 1
fi
wait_beside
