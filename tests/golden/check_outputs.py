#!/usr/bin/env python3
"""Compares what the read side prints for every committed recording with a stored expectation.

Each recording under tests/fixtures/recordings/ is copied to a scratch directory (the
commands below write recomputed incidents into it) and read with

    jobs --json, incidents --json, incidents --recompute --json, report --json,
    report --text, health --db --json

The outputs must equal tests/golden/expected/<recording>.json byte for byte after one
normalisation: `detected_ms` of recomputed incidents is the wall clock of the recompute.
A refactor of the read side must leave them unchanged; a change of behaviour updates them
on purpose with --update, and the diff shows what changed.

Usage: check_outputs.py STALLWATCH_BINARY [--update]
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "fixtures" / "recordings"
EXPECTED = ROOT / "tests" / "golden" / "expected"

# (name, arguments): the order matters, --recompute rewrites the stored incidents.
COMMANDS = [
    ("jobs", ["jobs", "--json"]),
    ("incidents_stored", ["incidents", "--live", "--json"]),
    ("incidents_recompute", ["incidents", "--recompute", "--json"]),
    ("report", ["report", "--json"]),
    ("report_text", ["report"]),
    ("health", ["health", "--json", "--db"]),  # --db PATH is appended last
]


def normalise(value):
    if isinstance(value, dict):
        return {k: (0 if k == "detected_ms" else "-" if k == "stallwatch_version" else normalise(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def outputs_of(binary, db):
    result = {}
    for name, args in COMMANDS:
        argv = [binary, "--log-level", "off", *args]
        argv += [str(db)] if args[-1] == "--db" else ["--db", str(db)]
        # Times in the zone shown: the goldens are UTC's, whatever the machine's zone.
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, TZ="UTC"))
        entry = {"exit": proc.returncode}
        if "--json" in args:
            try:
                entry["json"] = normalise(json.loads(proc.stdout))
            except json.JSONDecodeError:
                entry["stdout"] = proc.stdout
        else:
            entry["stdout"] = proc.stdout
        result[name] = entry
    return result


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = sys.argv[1]
    update = "--update" in sys.argv[2:]
    EXPECTED.mkdir(parents=True, exist_ok=True)
    recordings = sorted(RECORDINGS.glob("*.db"))
    if not recordings:
        print(f"no recordings under {RECORDINGS}", file=sys.stderr)
        return 2
    failed = []
    with tempfile.TemporaryDirectory() as scratch:
        for db in recordings:
            for extra in ("", "-wal", "-shm"):
                src = db.with_name(db.name + extra)
                if src.exists():
                    shutil.copy(src, pathlib.Path(scratch) / src.name)
            got = json.dumps(outputs_of(binary, pathlib.Path(scratch) / db.name),
                             indent=1, sort_keys=True) + "\n"
            expected_file = EXPECTED / (db.stem + ".json")
            if update:
                expected_file.write_text(got)
                print(f"updated {expected_file.relative_to(ROOT)}")
                continue
            if not expected_file.exists():
                failed.append(f"{db.name}: no expected output (run with --update)")
                continue
            if expected_file.read_text() != got:
                actual = expected_file.with_suffix(".actual.json")
                pathlib.Path(scratch, actual.name).write_text(got)
                shutil.copy(pathlib.Path(scratch, actual.name), actual)
                failed.append(f"{db.name}: differs; diff -u {expected_file.relative_to(ROOT)} "
                              f"{actual.relative_to(ROOT)}")
            else:
                print(f"same: {db.name}")
    for line in failed:
        print("FAIL " + line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
