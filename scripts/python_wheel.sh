#!/usr/bin/env bash
# Builds the Python package (python/: `import stallwatch`, the dataloader hook and `stallwatch
# run`'s bootstrap) as a wheel, for the virtualenvs and conda environments training runs in,
# which do not see the system's dist-packages where the .deb puts its copy:
#   scripts/python_wheel.sh [OUT_DIR (default build-pkg)]   then, in the job's environment:
#   pip install OUT_DIR/stallwatch-VERSION-py3-none-any.whl
# Offline, with Debian's python3-setuptools and python3-wheel (no pip, no download). The
# version is the agent's (CMakeLists.txt's project version); a mismatch fails the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/build-pkg}" && cd "${1:-$root/build-pkg}" && pwd)
agent=$(sed -n 's/^project(stallwatch VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
python=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/python/pyproject.toml")
module=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$root/python/stallwatch/__init__.py")
if [ "$agent" != "$python" ] || [ "$agent" != "$module" ]; then
  echo "python_wheel: versions differ: agent $agent, pyproject.toml $python, __version__ $module" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/python/." "$work/"
find "$work" -name __pycache__ -prune -exec rm -rf {} +
(cd "$work" && /usr/bin/python3 -c '
import sys
from setuptools import build_meta
print(build_meta.build_wheel(sys.argv[1]))' "$out" > "$work/name")
echo "$out/$(tail -1 "$work/name")"
