#!/usr/bin/env python3
"""Fails when a folder includes, or links, a layer it may not depend on.

The source of truth is the layer table in docs/DESIGN.md ("As built"): each row names a
folder and, in its last column, the folders it may depend on ("—" for none). Checked:
  - every `#include "folder/..."` in that folder's .h, .cpp and .c files, its sub-folders' too;
  - every stallwatch_<folder> library named in that folder's CMakeLists.txt.
  - no SQL outside storage/: no SQLiteCpp, no `PRAGMA user_version`, in any other layer.
tests/, bench/ and fuzz/ may use any layer and are not checked.

The same table is where the other scripts (function_sizes.py, check_tidy.py, check_format.sh)
take the list of folders from: `check_layers.py --list [REPO_ROOT]` prints it.

Usage: check_layers.py [REPO_ROOT] | check_layers.py --list [REPO_ROOT]
"""
import pathlib
import re
import sys

LIST = len(sys.argv) > 1 and sys.argv[1] == "--list"
ARGS = sys.argv[2:] if LIST else sys.argv[1:]
ROOT = pathlib.Path(ARGS[0] if ARGS else pathlib.Path(__file__).resolve().parents[1])
ROW = re.compile(r"^\|\s*`([a-z_]+)/`\s*\|.*\|\s*([^|]*?)\s*\|\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
SQL = re.compile(r"SQLite::|SQLiteCpp|user_version")
LIBRARY = re.compile(r"\bstallwatch_([a-z_]+)\b")


def layer_table():
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    section = text[text.index("## As built"):]
    layers = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            deps = m.group(2).replace("`", "").replace("/", "")
            layers[m.group(1)] = set() if deps.strip() in ("—", "-", "") else \
                {d.strip() for d in deps.split(",") if d.strip()}
    return layers


def main():
    layers = layer_table()
    if LIST:
        print(" ".join(sorted(layers)))
        return 0 if layers else 2
    if not layers:
        print("check_layers: no layer table found in docs/DESIGN.md", file=sys.stderr)
        return 2
    problems = []
    for folder, allowed in sorted(layers.items()):
        unknown = allowed - layers.keys()
        if unknown:
            problems.append(f"docs/DESIGN.md: {folder}/ depends on unknown folder(s) {sorted(unknown)}")
        ok = allowed | {folder}
        path = ROOT / folder
        if not path.is_dir():
            problems.append(f"docs/DESIGN.md names {folder}/, which does not exist")
            continue
        for source in sorted(path.rglob("*.h")) + sorted(path.rglob("*.cpp")) + sorted(path.rglob("*.c")):
            for m in INCLUDE.finditer(source.read_text()):
                target = m.group(1)
                if target in layers and target not in ok:
                    line = source.read_text()[:m.start()].count("\n") + 1
                    problems.append(f"{source.relative_to(ROOT)}:{line}: {folder}/ includes {target}/, "
                                    f"which it may not depend on (allowed: {', '.join(sorted(allowed)) or 'none'})")
            if folder != "storage":
                for n, line in enumerate(source.read_text().splitlines(), 1):
                    if SQL.search(line):
                        problems.append(f"{source.relative_to(ROOT)}:{n}: SQL outside storage/ "
                                        f"(read through storage::Recording instead): {line.strip()}")
        cmake = path / "CMakeLists.txt"
        if cmake.exists():
            for m in LIBRARY.finditer(cmake.read_text()):
                target = m.group(1)
                if target in layers and target not in ok:
                    problems.append(f"{cmake.relative_to(ROOT)}: {folder}/ links stallwatch_{target}, "
                                    f"which it may not depend on")
    for folder in sorted(p.name for p in ROOT.iterdir() if (p / "CMakeLists.txt").exists()):
        if folder not in layers and folder not in ("tests", "bench", "fuzz"):
            problems.append(f"{folder}/ has no row in docs/DESIGN.md's layer table")
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"layers ok: {len(layers)} folders checked against docs/DESIGN.md")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
