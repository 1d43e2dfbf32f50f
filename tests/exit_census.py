#!/usr/bin/env python3
"""Issue 48's census: over every committed recording, the jobs whose post-mortem has an incident
that starts at or after the job's last progress and runs on past it (to the job's end), where
the exit rule says the job was winding down, not stalled. Prints one line per such incident and
the count; exit status 0 either way (a census, not a test; test_gpu_recordings holds the rule).

Last progress, by the report's progress signal: the last interval with a step reported, or with
GPU work (utilisation) at half the run's median of its busy intervals or more.

Usage: exit_census.py STALLWATCH_BINARY [RECORDINGS_DIR]"""
import json
import swjson
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile


def last_progress_ms(db, job_id, signal):
    with sqlite3.connect(db) as c:
        if signal == "steps":
            row = c.execute("SELECT max(ts_ms) FROM job_samples WHERE job_id = ? AND steps > 0", (job_id,)).fetchone()
            return row[0]
        column = "gpu_work_percent" if signal == "gpu_work" else "gpu_util_percent"
        rows = c.execute(f"SELECT ts_ms, {column} FROM job_samples WHERE job_id = ? AND {column} IS NOT NULL "
                         "ORDER BY ts_ms", (job_id,)).fetchall()
    busy = [v for _, v in rows if v > 0]
    if not busy:
        return None
    level = 0.5 * statistics.median(busy)
    moving = [t for t, v in rows if v >= level]
    return moving[-1] if moving else None


def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                "fixtures", "recordings")
    found = checked = 0
    for directory, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".db")):
            tmp = tempfile.mkdtemp(prefix="stallwatch-census-")
            try:
                db = os.path.join(tmp, "run.db")
                for suffix in ("", "-wal"):
                    if os.path.exists(os.path.join(directory, name + suffix)):
                        shutil.copy(os.path.join(directory, name + suffix), db + suffix)
                out = subprocess.run([binary, "--log-level", "off", "report", "--db", db, "--json"],
                                     capture_output=True, text=True, timeout=300)
                if out.returncode != 0:
                    print(f"{name}: report failed: {out.stderr.strip()[:200]}")
                    continue
                for job in swjson.loads(out.stdout):
                    checked += 1
                    last = last_progress_ms(db, job["job_id"], job.get("progress_signal"))
                    if last is None:
                        continue
                    for inc in job["incidents"]:
                        if inc["start_ms"] >= last - 2000 and inc["end_ms"] > last:
                            found += 1
                            rel = os.path.relpath(os.path.join(directory, name), root)
                            print(f"{rel} job {job['job_id']}: {inc['class']} {inc['start_ms']}..{inc['end_ms']} "
                                  f"({(inc['end_ms'] - inc['start_ms']) / 1000:.0f} s, last progress {last}, "
                                  f"job end {job['end_ms']}), {inc['gpu_seconds_lost']:.1f} GPU-s")
            finally:
                shutil.rmtree(tmp, True)
    print(f"{found} incident(s) at or after the job's last progress, in {checked} jobs")


if __name__ == "__main__":
    main()
