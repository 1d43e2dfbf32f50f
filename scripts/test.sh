#!/usr/bin/env bash
# Installs what is missing (the tests' tools too), builds everything, and runs the whole test
# suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --dev
scripts/build.sh --dev
cd "${BUILD_DIR:-build}"
# Twice as many tests as cores: most end-to-end tests spend their time waiting on an agent's
# intervals, not computing (on 2 cores: 469 s at -j2, 292 s at -j4, the CPU 82 % busy).
ctest --output-on-failure --timeout 300 -j "$(( $(nproc) * 2 ))"
