#!/usr/bin/env bash
# Fails when a tracked C++ source does not follow .clang-format; prints the files to fix.
# Fix them with: git ls-files '*.cpp' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
bad=()
while IFS= read -r f; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cpp' '*.h' 2>/dev/null || find $(python3 "$(dirname "$0")/check_layers.py" --list) tests bench fuzz -name '*.cpp' -o -name '*.h')
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted (clang-format -i them): ${bad[*]}" >&2
  exit 1
fi
echo "format ok"
