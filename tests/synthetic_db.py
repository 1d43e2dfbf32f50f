#!/usr/bin/env python3
"""Writes a synthetic recording into a stallwatch database: one training job on GPUS GPUs
reading through loop1 (an image on vda), DEVICES block devices in all, one-second samples for
SECONDS, and optionally a stall: GPUs idle while loop1 and vda get slow (disk-slow), or while
I/O pressure rises (io-throttled), or with nothing else changing (not-storage), or while the
job's processes do nothing (idle-exit: put it at the end, the job winding down).

The schema is stallwatch's own: storage/schema_v*.sql applied in order, as the agent migrates
a new file.
Rows are generated inside SQLite with recursive CTEs, so a week of data takes seconds.

Usage: synthetic_db.py DB --stallwatch BIN [--seconds 600] [--gpus 1] [--devices 3]
                          [--stall disk-slow|io-throttled|not-storage --stall-at 300 --stall-for 30]"""

import argparse
import os
import sqlite3
import subprocess
import sys

T0_MS = 1_795_300_000_000  # 2026-11-22, a fixed origin keeps results reproducible


SCHEMA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "storage")


def create_schema(db_path):
    versions = sorted(int(f[len("schema_v"):-len(".sql")]) for f in os.listdir(SCHEMA_DIR)
                      if f.startswith("schema_v") and f.endswith(".sql"))
    db = sqlite3.connect(db_path)
    for v in versions:
        with open(os.path.join(SCHEMA_DIR, f"schema_v{v}.sql")) as f:
            db.executescript(f.read())
        db.execute(f"PRAGMA user_version = {v}")
    db.commit()
    db.close()


def build(db_path, stallwatch, seconds=600, gpus=1, devices=3, stall=None, stall_at=300, stall_for=30):
    create_schema(db_path)
    db = sqlite3.connect(db_path)
    s0, s1 = stall_at, stall_at + stall_for - 1
    disk_slow = 1 if stall in ("disk-slow", "disk-slow-neighbour") else 0
    neighbour = 1 if stall == "disk-slow-neighbour" else 0
    throttled = 1 if stall == "io-throttled" else 0
    stalled = 1 if stall else 0
    end_ms = T0_MS + (seconds - 1) * 1000
    uuids = [f"GPU-synthetic-{g}" for g in range(gpus)]
    db.execute("BEGIN")
    db.executemany("INSERT INTO gpus (uuid, gpu_index, name, first_seen_ms, last_seen_ms) VALUES (?,?,?,?,?)",
                   [(u, g, "Synthetic GPU", T0_MS, end_ms) for g, u in enumerate(uuids)])
    names = ["loop1", "vda"] + [f"sd{chr(ord('a') + i)}" for i in range(max(0, devices - 2))]
    for i, name in enumerate(names):
        db.execute("INSERT INTO block_devices (name, major, minor, kind, first_seen_ms, last_seen_ms) "
                   "VALUES (?,?,?,?,?,?)", (name, 7 if name == "loop1" else 8, i, "loop" if name == "loop1" else "disk",
                                            T0_MS, end_ms))
    db.execute("INSERT INTO jobs (job_key, label, root_pid, gpus, started_ms, ended_ms, last_seen_ms) "
               "VALUES ('pid:4242:1', 'python3 train.py', 4242, ?, ?, ?, ?)",
               (",".join(uuids), T0_MS, end_ms, end_ms))
    db.execute("INSERT INTO job_devices SELECT 1, device_id, '', 100, ?, ? FROM block_devices WHERE name = 'loop1'",
               (T0_MS, end_ms))
    db.execute("INSERT INTO job_devices SELECT 1, device_id, 'loop1', 100, ?, ? FROM block_devices WHERE name = 'vda'",
               (T0_MS, end_ms))
    series = "WITH RECURSIVE t(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM t WHERE i < ?) "
    params = dict(n=seconds - 1, t0=T0_MS, s0=s0, s1=s1, st=stalled, ds=disk_slow, th=throttled,
                  ie=1 if stall == "idle-exit" else 0, nb=neighbour)

    def run(sql):
        db.execute(series.replace("?", ":n") + sql, params)

    in_stall = "(:st AND t.i BETWEEN :s0 AND :s1)"
    # Per-GPU utilisation is a deterministic function of (interval, GPU), so that the job's
    # mean, which the recorder writes into job_samples, can be written alongside.
    util = f"CASE WHEN {in_stall} THEN (t.i + g.gpu_index) % 5 ELSE 55 + (t.i * 7 + g.gpu_index * 13 + t.i * t.i % 11) % 26 END"
    idle = f"({in_stall} AND :ie)"  # the job winding down: its processes do nothing
    run(f"""INSERT INTO job_samples SELECT :t0 + t.i * 1000, 1, 1000, 5, 4,
            CASE WHEN {idle} THEN 0 ELSE 1e8 + (abs(random()) % 20000000) END,
            1e6, 1e8, 3000, CASE WHEN {idle} THEN 0 ELSE 0.9 END, CASE WHEN {idle} THEN 0 ELSE 1.1 END,
            CASE WHEN {in_stall} AND :th THEN 4 ELSE 0 END, NULL,
            CASE WHEN {in_stall} THEN 1 ELSE 9 + abs(random()) % 3 END, NULL,
            CASE WHEN {in_stall} THEN 0.95 ELSE 0.1 END, CASE WHEN {in_stall} THEN 0.05 ELSE 0.85 END,
            (SELECT avg({util}) FROM gpus g), NULL,
            NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            -- who else used loop1, read every 5 intervals: a backup service, at 2 MB/s before and
            -- 180 MB/s during the stall when the case says so
            CASE WHEN t.i % 5 != 0 THEN NULL WHEN NOT :nb THEN ''
                 ELSE 'loop1' || char(9) || '/system.slice/backup.service' || char(9) ||
                      (CASE WHEN {in_stall} THEN 180000000 ELSE 2000000 END) || char(9) || '0' END,
            CASE WHEN {idle} THEN 'do_wait' ELSE NULL END,  -- where the idle main process sleeps
            -- schema 11: the main thread's CPU and run-queue wait, where it slept (sampled),
            -- pin_memory, stopped processes, where workers slept, the CPUs allowed, the limit
            NULL, NULL, NULL, NULL, 0, 0, '', NULL, NULL
            FROM t""")  # no cgroup of its own
    run(f"""INSERT INTO gpu_samples SELECT :t0 + t.i * 1000, g.gpu_id, 1000, {util},
            6, NULL, 20000000000, 1980, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM t, gpus g""")
    run(f"""INSERT INTO disk_samples SELECT :t0 + t.i * 1000, d.device_id, 1000, 2000, 50, 8e7, 2e5,
            CASE WHEN {in_stall} AND :ds AND d.name IN ('loop1', 'vda') THEN 20 + abs(random()) % 30
                 ELSE 0.2 + (abs(random()) % 30) / 100.0 END,
            0.5 + (abs(random()) % 50) / 100.0, NULL, NULL, NULL, NULL,
            CASE WHEN {in_stall} AND :ds AND d.name IN ('loop1', 'vda') THEN 12 ELSE 0.5 END,
            20, 1 FROM t, block_devices d""")
    run(f"""INSERT INTO pressure_samples SELECT :t0 + t.i * 1000, 1000, r.resource,
            CASE WHEN r.resource = 'io' AND {in_stall} AND (:ds OR :th) THEN 0.6
                 ELSE (abs(random()) % 3) / 100.0 END, 0.0
            FROM t, (SELECT 'io' AS resource UNION ALL SELECT 'cpu' UNION ALL SELECT 'memory') r""")
    db.execute("COMMIT")
    db.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("--stallwatch", required=True)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--devices", type=int, default=3)
    ap.add_argument("--stall", choices=["disk-slow", "disk-slow-neighbour", "io-throttled", "not-storage",
                                        "idle-exit"])
    ap.add_argument("--stall-at", type=int, default=300)
    ap.add_argument("--stall-for", type=int, default=30)
    a = ap.parse_args()
    if os.path.exists(a.db):
        sys.exit(f"{a.db} exists; give a new file")
    build(a.db, a.stallwatch, a.seconds, a.gpus, a.devices, a.stall, a.stall_at, a.stall_for)


if __name__ == "__main__":
    main()
