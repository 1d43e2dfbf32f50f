#!/usr/bin/env python3
"""clang-tidy (.clang-tidy: bug and performance checks, warnings as errors) over the sources of
every layer, skipping a file whose last run passed on exactly the same input.

The key of a file is what clang-tidy would see: its compile command, the preprocessed text
(the file and every header it includes, ours and the system's), .clang-tidy and clang-tidy's
version. A pass is remembered under that key in the cache folder; a failure never is. CI's
clean clone on a machine that ran it before so re-checks only the files a change reaches;
a fresh machine (empty cache) checks the files whose key is not in the ledger the tree carries,
.ci/tidy-passes: the keys of the files that passed where it was last written (--record, after
a passing run). A key is a hash of exactly what clang-tidy reads, so a key in the ledger is that
input's pass; a file a change reaches has a new key and is checked. A stale ledger only costs
time.

Usage: scripts/check_tidy.py [BUILD_DIR (default build)] [--cache DIR] [--no-cache] [--record]
Cache: $STALLWATCH_TIDY_CACHE, else $XDG_CACHE_HOME/stallwatch/tidy (~/.cache/...).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Needs the CUDA toolkit's nvml.h, which the build finds on its own.
SKIPPED = {"nvml_abi_check.cpp"}
LEDGER = ROOT / ".ci" / "tidy-passes"


def default_cache() -> Path:
    if os.environ.get("STALLWATCH_TIDY_CACHE"):
        return Path(os.environ["STALLWATCH_TIDY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stallwatch" / "tidy"


def layer_sources() -> list[Path]:
    files = []
    # The layer folders, from docs/DESIGN.md's table.
    folders = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_layers.py"), "--list",
                              str(ROOT)], capture_output=True, text=True, check=True).stdout.split()
    for folder in folders:
        files += sorted(p for p in (ROOT / folder).rglob("*.cpp") if p.name not in SKIPPED)
    return files


def compile_entries(build: Path) -> dict:
    """Each source's compile command. A unity build (scripts/build.sh, cmake/unity.cmake)
    compiles a target's sources through generated units that #include them; a source found there
    gets its unit's command with its own path in place of the unit's, so its flags and key are
    the ones a build of the file alone would give."""
    entries = {}
    for e in json.loads((build / "compile_commands.json").read_text()):
        unity = Path(e["file"])
        if unity.parent.name != "unity":
            entries[unity.resolve()] = e
            continue
        for included in re.findall(r'^#include "(.+)"$', unity.read_text(), re.MULTILINE):
            source = str((unity.parent / included).resolve())
            own = dict(e, file=source)
            if "command" in own:
                own["command"] = own["command"].replace(str(unity), source)
            else:
                own["arguments"] = [source if a == str(unity) else a for a in own["arguments"]]
            entries[Path(source).resolve()] = own
    return entries


def preprocess_command(entry: dict) -> list[str]:
    """The file's own compile command, made to print the preprocessed text instead."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    # -P: no line markers, so a key does not change with the folder the tree is cloned into.
    return out + ["-E", "-P", "-o", "-"]


def key_of(entry: dict, salt: bytes) -> str:
    command = preprocess_command(entry)
    text = subprocess.run(command, cwd=entry["directory"], capture_output=True, check=True).stdout
    flags = [a for a in command if a.startswith(("-D", "-std", "-f", "-W"))]
    h = hashlib.sha256(salt)
    h.update(" ".join(flags).encode())
    h.update(str(Path(entry["file"]).relative_to(ROOT)).encode())
    h.update(text)
    return h.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", nargs="?", default=str(ROOT / "build"))
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--no-cache", action="store_true", help="check every file")
    parser.add_argument("--record", action="store_true",
                        help="write every file's key to .ci/tidy-passes when all pass")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    db = build / "compile_commands.json"
    if not db.exists():
        print(f"no {db}: configure first", file=sys.stderr)
        return 2
    entries = compile_entries(build)
    files = [f for f in layer_sources() if f in entries]
    missing = [f for f in layer_sources() if f not in entries]
    if missing:
        print("not in the compile database (not built?): " + " ".join(map(str, missing)),
              file=sys.stderr)
        return 2

    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    salt = version + (ROOT / ".clang-tidy").read_bytes()
    started = time.monotonic()
    jobs = os.cpu_count() or 2
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        keys = dict(zip(files, pool.map(lambda f: key_of(entries[f], salt), files)))
    cache = args.cache
    ledger = set(LEDGER.read_text().split()) if LEDGER.exists() and not args.no_cache else set()
    to_check = files if args.no_cache else [
        f for f in files if not (cache / keys[f]).exists() and keys[f] not in ledger]
    from_ledger = sum(1 for f in files if keys[f] in ledger and not (cache / keys[f]).exists())

    # clang-tidy reads the commands of the sources themselves, the unity build's included.
    database = build / "tidy"
    database.mkdir(exist_ok=True)
    (database / "compile_commands.json").write_text(json.dumps(list(entries.values()), indent=1))

    def tidy(f: Path):
        # The compile database is GCC's: a warning option clang does not know (GCC 12's
        # -Wno-restrict) is not a finding.
        r = subprocess.run(["clang-tidy", "-p", str(database), "--quiet",
                            "--extra-arg=-Wno-unknown-warning-option", str(f)],
                           capture_output=True, text=True)
        return f, r.returncode, r.stdout

    failed = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for f, rc, out in pool.map(tidy, to_check):
            if rc != 0:
                failed.append((f, out))
            elif not args.no_cache:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / keys[f]).write_text(str(f.relative_to(ROOT)) + "\n")
    for f, out in failed:
        lines = sorted({l for l in out.splitlines() if "error:" in l or "warning:" in l})
        print("\n".join(lines) or f"{f}: clang-tidy failed", file=sys.stderr)
    if args.record and not failed:
        LEDGER.write_text("".join(f"{k}\n" for k in sorted(keys.values())))
    took = time.monotonic() - started
    print(f"tidy {'failed' if failed else 'ok'}: {len(files)} files, {len(to_check)} checked, "
          f"{len(files) - len(to_check)} unchanged since a pass (cache {cache}; {from_ledger} "
          f"known from {LEDGER.relative_to(ROOT)}), {took:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
