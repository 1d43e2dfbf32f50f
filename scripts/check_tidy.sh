#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: a modest set of bug and performance checks, warnings as
# errors) over the sources of every layer, using BUILD_DIR's compile_commands.json.
# Usage: scripts/check_tidy.sh [BUILD_DIR (default build)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
cd "$root"
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure first" >&2; exit 2; }
# nvml_abi_check.cpp needs the CUDA toolkit's nvml.h, which the build finds on its own.
# Every layer of docs/DESIGN.md's table (scripts/check_layers.py --list).
files=$(for d in $(python3 scripts/check_layers.py --list "$root"); do ls "$d"/*.cpp 2>/dev/null; done |
  grep -v nvml_abi_check.cpp)
if ! printf '%s\n' $files | xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet 2>/dev/null >"$build/tidy.log"; then
  grep -E "error:|warning:" "$build/tidy.log" | sort -u >&2
  exit 1
fi
echo "tidy ok: $(printf '%s\n' $files | wc -l) files"
