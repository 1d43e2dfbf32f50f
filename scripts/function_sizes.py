#!/usr/bin/env python3
"""Lists the longest functions and files of the layers (every folder of docs/DESIGN.md's layer
table, as check_layers.py reads it), for keeping an eye on size.

A function is a definition that starts at column 0 and ends at the next "}" at column 0, as
clang-format (Google style) lays them out; lambdas and member functions defined inside a
class body count with their enclosing definition.

Usage: function_sizes.py [REPO_ROOT] [N]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1]
TOP = int(sys.argv[2]) if len(sys.argv) > 2 else 10
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.argv = sys.argv[:1] + [str(ROOT)]  # check_layers reads its root from the arguments
import check_layers  # noqa: E402

LAYERS = sorted(check_layers.layer_table())
NOT_A_FUNCTION = re.compile(r"^(namespace|struct|class|enum|union|using|typedef|static_assert|extern|#|//|/\*|\}|template)")


def functions(path):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line and not line[0].isspace() and not NOT_A_FUNCTION.match(line) and "(" in line:
            # the signature may run over several lines; the body opens with "{" at its end
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{"):
                if lines[j].rstrip().endswith("}"):
                    i = j + 1
                    continue
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                name = re.sub(r"\s+", " ", line.split("(")[0]).split(" ")[-1]
                yield name, k - i + 1, i + 1
                i = k + 1
                continue
        i += 1


def main():
    found, files = [], []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.[ch]*")):
            if path.suffix not in (".cpp", ".h"):
                continue
            rel = path.relative_to(ROOT)
            files.append((len(path.read_text().splitlines()), str(rel)))
            for name, n, line in functions(path):
                found.append((n, f"{name} ({rel}:{line})"))
    found.sort(reverse=True)
    files.sort(reverse=True)
    print(f"longest functions (lines, of {len(found)}):")
    for n, where in found[:TOP]:
        print(f"  {n:5d}  {where}")
    print(f"longest files (lines, of {len(files)}):")
    for n, where in files[:TOP]:
        print(f"  {n:5d}  {where}")


if __name__ == "__main__":
    main()
