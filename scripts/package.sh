#!/usr/bin/env bash
# Builds the Debian package: a Release build in build-pkg/ (no tests, no benchmarks), then
# CPack, and the Python hook's wheel (scripts/python_wheel.sh). Prints their paths.
# Usage: scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-pkg}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DSTALLWATCH_TESTS=OFF \
  -DSTALLWATCH_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 || { tail -30 "$build/build.log"; exit 1; }
(cd "$build" && cpack -G DEB >/dev/null)
ls "$(realpath "$build")"/stallwatch_*.deb
# The Python hook as a wheel beside it, for the job's virtualenv or conda environment.
"$(dirname "$0")/python_wheel.sh" "$build" 2>/dev/null
