#!/usr/bin/env bash
# Configures and builds stallwatch into ./build (or $BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLWATCH_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
