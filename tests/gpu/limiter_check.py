#!/usr/bin/env python3
"""Holds the bottleneck verdicts of issue 31's A/B runs (tests/gpu/limiter_runs.sh) against
the jobs' own step logs.

For each run in the directories given: the verdict (`stallwatch report --json`), its input-wait
share against the share of the same span the job itself spent waiting for its batches (the
step log's wait / (wait + step)), and the speed-up it predicts against the one measured when
the next configuration removed the limit (the steps per second of REFERENCE[case], with the
hook or without it as the run, over the run's own) and against the job fed from memory (the
`gpu` run: input keeping up entirely). A missing reference run is left out.

Usage: limiter_check.py STALLWATCH_BINARY DIR [DIR...] [--json OUT]
"""
import json
import os
import subprocess
import sys

# The configuration that removes each run's limit (limiter_runs.sh): more workers, no read
# limit, the same files read directly instead of through the slow FUSE mount, data in memory.
REFERENCE = {"w2": "w4", "w4": "w8", "limited": "nodecode", "fusestore": "nodecode", "fetch": "gpu"}


def steps_of(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                rows.append(tuple(float(x) for x in parts))
    return rows


def pace(rows, start_s, end_s):
    """Steps per second, the wait share and the GPU-side pace over the steps ending in the span."""
    span = [r for r in rows if start_s < r[0] <= end_s]
    if len(span) < 10:
        return None
    wait = sum(r[1] for r in span)
    step = sum(r[2] for r in span)
    return {"steps_per_s": (len(span) - 1) / (span[-1][0] - span[0][0]),
            "wait_share": wait / (wait + step), "ceiling": len(span) / step}


def main():
    args = sys.argv[1:]
    out_json = None
    if "--json" in args:
        out_json = args[args.index("--json") + 1]
        del args[args.index("--json"):args.index("--json") + 2]
    binary, dirs = args[0], args[1:]
    runs = {}
    for d in dirs:
        for name in sorted(os.listdir(d)):
            if not name.endswith(".db"):
                continue
            run = name[:-3]
            report = json.loads(subprocess.run([binary, "--log-level", "off", "report", "--db",
                                                os.path.join(d, name), "--json"],
                                               capture_output=True, text=True, check=True).stdout)["jobs"]
            if not report:
                continue
            v = report[0]["limiter"]
            rows = steps_of(os.path.join(d, run + ".steps"))
            own = pace(rows, v["start_ms"] / 1000, v["end_ms"] / 1000)
            text = subprocess.run([binary, "--log-level", "off", "report", "--db",
                                   os.path.join(d, name)], capture_output=True, text=True).stdout
            line = next((l.strip()[len("limiter"):].strip() for l in text.splitlines()
                         if l.strip().startswith("limiter ")), "")
            runs[run] = {"verdict": v, "own": own, "line": line}
    table = []
    print(f"{'run':18s} {'verdict':14s} {'conf':>4s} {'source':20s} {'wait sw':>7s} {'own':>5s} "
          f"{'diff':>5s} {'pred x':>6s} {'next x':>6s} {'ratio':>5s} {'mem x':>6s} {'ratio':>5s}")
    for run, r in runs.items():
        v, own = r["verdict"], r["own"]
        case = run.replace("-nohook", "")
        suffix = "-nohook" if run.endswith("-nohook") else ""
        ref = runs.get(REFERENCE.get(case, "") + suffix)
        measured = ceiling = None
        if ref and own and ref["own"]:
            measured = ref["own"]["steps_per_s"] / own["steps_per_s"]
        fed = runs.get("gpu" + suffix)
        if fed and own and fed["own"] and v["limiter"] not in ("gpu", "host"):
            ceiling = fed["own"]["steps_per_s"] / own["steps_per_s"]
        row = {"run": run, "limiter": v["limiter"], "confidence": v["confidence"],
               "wait_source": v["wait_source"], "input_wait_share": v["input_wait_share"],
               "own_wait_share": own["wait_share"] if own else None,
               "speedup": v["speedup"], "speedup_low": v["speedup_low"],
               "speedup_high": v["speedup_high"], "measured_speedup": measured,
               "reference": (REFERENCE.get(case, "") + suffix) if measured else None,
               "measured_speedup_fed_from_memory": ceiling,
               "device": v["device"], "limit": v["limit"], "advice": v["advice"],
               "line": r["line"]}
        table.append(row)
        diff = (v["input_wait_share"] - own["wait_share"]) * 100 if own else None
        print(f"{run:18s} {v['limiter']:14s} {v['confidence']:4.2f} {str(v['wait_source']):20s} "
              f"{v['input_wait_share'] * 100:6.1f}% "
              f"{own['wait_share'] * 100 if own else float('nan'):4.1f}% "
              f"{diff if diff is not None else float('nan'):+5.1f} {v['speedup']:6.2f} "
              f"{measured if measured else float('nan'):6.2f} "
              f"{v['speedup'] / measured if measured else float('nan'):5.2f} "
              f"{ceiling if ceiling else float('nan'):6.2f} "
              f"{v['speedup'] / ceiling if ceiling else float('nan'):5.2f}")
    print()
    for row in table:
        print(f"{row['run']}: {row['line']}")
        for a in row["advice"]:
            print(f"    advice ({a['kind']}): {a['text']}")
    if out_json:
        with open(out_json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
