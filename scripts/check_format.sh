#!/usr/bin/env bash
# Fails when a tracked C++ source does not follow .clang-format; prints the files to fix.
# Fix them with: git ls-files '*.cpp' '*.h' | xargs clang-format -i
# One clang-format for all the files (a process per file took 30 s, mostly its start-up).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.h' 2>/dev/null ||
        find $(python3 "$(dirname "$0")/check_layers.py" --list) tests bench fuzz -name '*.cpp' -o -name '*.h')
errors=$(echo "$files" | xargs clang-format --dry-run -Werror 2>&1 >/dev/null || true)
bad=$(echo "$errors" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ -n "$bad" ]; then
  echo "not formatted (clang-format -i them):" $bad >&2
  exit 1
elif [ -n "$errors" ]; then
  echo "clang-format failed: $errors" >&2
  exit 1
fi
echo "format ok"
