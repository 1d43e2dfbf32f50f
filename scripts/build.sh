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
# Each target's sources compiled a few to a unit (cmake/unity.cmake): the cold build on 2 cores
# takes half the time. An edit recompiles its file's unit. Ninja where it is installed
# (install-deps.sh installs it): it starts a unit once its own inputs are there, where CMake's
# Makefiles start a target only when every library it links is built. CMake takes
# CMAKE_GENERATOR for a new folder only: one configured before keeps its own.
flags+=(-DSTALLWATCH_UNITY=ON)
if command -v ninja > /dev/null; then
  export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}
fi
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
