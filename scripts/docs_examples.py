#!/usr/bin/env python3
"""The example outputs in README.md and docs/*.md, produced by the binary from committed
recordings (issue 44: the README's "real stalled run" still showed a report two versions old).

A fenced block preceded by a marker line is an example:

    <!-- example: report --db tests/fixtures/recordings/h200-stall-disk.db -->
    ```
    ...the output of `stallwatch --log-level off report --db ...`...
    ```

The recording is copied with its -wal first (a reader may write beside it), and its copy's
path is written back as the marker gave it. Check mode prints each example that differs and
exits 1; --update rewrites the blocks.

Usage: scripts/docs_examples.py [--update] STALLWATCH_BINARY FILE.md [FILE.md...]"""
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"^<!-- example: (.*) -->$")


def output_of(binary, args, tmp):
    argv = shlex.split(args)
    shown = {}
    for i, a in enumerate(argv):
        if a.endswith(".db") and os.path.exists(os.path.join(ROOT, a)):
            copy = os.path.join(tmp, f"{i}-{os.path.basename(a)}")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(os.path.join(ROOT, a) + suffix):
                    shutil.copy(os.path.join(ROOT, a) + suffix, copy + suffix)
            argv[i] = copy
            shown[copy] = a
    # As a machine on UTC shows it (times are in the local zone, the zone said).
    r = subprocess.run([binary, "--log-level", "off", *argv], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=dict(os.environ, TZ="UTC"))
    out = r.stdout
    for copy, path in shown.items():
        out = out.replace(copy, path)
    return out.rstrip("\n").split("\n")


def examples(lines):
    """(marker index, fence start, fence end, args) of each example block."""
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        start = i + 1
        if start >= len(lines) or not lines[start].startswith("```"):
            raise SystemExit(f"line {i + 1}: an example marker must be followed by a fenced block")
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        yield i, start, end, m.group(1)


def main(argv):
    update = "--update" in argv
    argv = [a for a in argv if a != "--update"]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary, files = os.path.abspath(argv[0]), argv[1:]
    stale = 0
    checked = 0
    with tempfile.TemporaryDirectory(prefix="stallwatch-docs-") as tmp:
        for path in files:
            with open(path) as f:
                lines = f.read().split("\n")
            for _, start, end, args in reversed(list(examples(lines))):
                checked += 1
                want = output_of(binary, args, tmp)
                have = lines[start + 1:end]
                if have == want:
                    continue
                stale += 1
                if update:
                    lines[start + 1:end] = want
                else:
                    print(f"{path}:{start + 1}: `stallwatch {args}` prints otherwise:")
                    sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                        have, want, "documented", "printed", lineterm="", n=1))
            if update:
                with open(path, "w") as f:
                    f.write("\n".join(lines))
    print(f"{checked} examples, {stale} {'updated' if update else 'stale'}")
    return 0 if update or stale == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
