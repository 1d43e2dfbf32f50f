#!/usr/bin/env bash
# Installs what is missing (the tests' tools too), builds everything, and runs the whole test
# suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --dev
scripts/build.sh --dev
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 300 -j2
