#!/usr/bin/env bash
# Builds stallwatch into ./build (or $BUILD_DIR), showing what the build has (its feature
# summary: which collectors were built, what is missing for the rest). Extra arguments go to
# cmake.
#   scripts/build.sh          the binary alone, Release (README's first command): build/stallwatch
#   scripts/build.sh --dev    everything, tests and benchmarks, warnings as errors (CI, test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
mode=user
if [ "${1:-}" = "--dev" ]; then
  mode=dev
  shift
fi
if [ $mode = dev ]; then
  # Line tables only (-g1): full debug info was over a third of each compile.
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
         "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
         -DSTALLWATCH_WERROR=ON -DSTALLWATCH_TESTS=ON -DSTALLWATCH_BENCH=ON)
  targets=()
else
  # No -Werror for a user's build: a newer compiler's new warning must not stop it.
  flags=(-DCMAKE_BUILD_TYPE=Release -DSTALLWATCH_WERROR=OFF -DSTALLWATCH_TESTS=OFF -DSTALLWATCH_BENCH=OFF)
  targets=(--target stallwatch)
fi
# Each folder's sources compiled a few to a unit (CMake's unity build): the headers every file
# includes (CLI11, GoogleTest, spdlog, the model) are parsed once for them, not once a file;
# the cold build on 2 cores takes half the time (docs/MEASUREMENTS.md, "CI's own time"). An
# edit recompiles its file's batch.
flags+=(-DCMAKE_UNITY_BUILD=ON)
# CMake's messages, less its compiler probing: our own status lines and the feature summary.
log=$(mktemp /tmp/stallwatch-configure.XXXXXX.log)
if ! cmake -S . -B "$build" "${flags[@]}" "$@" > "$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
grep -v -E '^-- (Check|Detecting|Looking for|Performing|Found |The (C|CXX) compiler|Configuring done|Generating done|Build files)' "$log" || true
rm -f "$log"
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
[ $mode = dev ] || echo "build: $build/stallwatch"
