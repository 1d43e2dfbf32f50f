#!/usr/bin/env python3
"""Fails when a per-interval Series of model/series.h is missing from its struct's one list.

PaceSeries (what a job and its ranks share), JobSeries and DeviceSeries each keep every
per-interval Series they declare in one list (forEachSeries; RankSeries declares none of its
own), which sizes, trims and cuts them all alike; a Series left out stays empty and
is then indexed past its end. Checked here because C++ cannot enumerate a struct's members.

Usage: check_series.py [REPO_ROOT]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])


def main():
    src = (ROOT / "model" / "series.h").read_text()
    problems = []
    for struct in ("DeviceSeries", "PaceSeries", "RankSeries", "JobSeries"):
        body = src[re.search(r"struct " + struct + r"( : \w+)? \{", src).start():]
        body = body[:body.index("\n};")]
        declared = set()
        for m in re.finditer(r"^\s*Series ([^;]+);", body, re.M):
            declared |= {n.strip() for n in m.group(1).replace("\n", " ").split(",")}
        listed = set(re.findall(r"&(?:s\.)?(\w+)", body))
        for name in sorted(declared - listed):
            problems.append(f"model/series.h: {struct}::{name} is not in {struct}'s forEachSeries list")
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("series ok: every Series is in its struct's list")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
