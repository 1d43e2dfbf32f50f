#!/usr/bin/env python3
"""Writes synthetic recordings of one synchronous training run across NODES nodes, one
stallwatch database per node (DIR/node-NN.db), as each node's agent would have written them:
the run's job (torchrun's TORCHELASTIC_RUN_ID, so every node gives it the same key) with
GPUS ranks per node (global ranks node * GPUS + local), each rank's samples, its GPUs, loop1
(an image on vda) that the job reads, and host pressure; one-second samples for SECONDS.

Optionally one node holds the job back (--straggler N --stall disk-slow|not-storage --stall-at
S --stall-for D): its rank (local --straggler-rank) starves, its GPU idles and its data wait
rises (with disk-slow, loop1 and vda get slow on that node only), while every other rank spins
in the collective (utilisation stays high, GPU work falls to 0) and the whole job's steps fall.
--stall-everywhere makes every node starve alike instead (a shared filesystem got slow).
--skew N=MS shifts node N's clock by MS; --skip N writes no recording for node N.

Steps per interval follow one deterministic rhythm of the run's time on every node (a
synchronous job steps in lockstep), so the nodes' clocks can be checked against each other.
Rows are generated inside SQLite with recursive CTEs, one node at a time.

Usage: synthetic_fleet.py DIR [--nodes 4] [--gpus 1] [--seconds 600] [--straggler 2 ...]"""

import argparse
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synthetic_db import T0_MS, create_schema  # noqa: E402

RUN_ID = "synthetic-fleet"


def build_node(path, node, a):
    create_schema(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    gpus, world = a.gpus, a.nodes * a.gpus
    phase = (node * 137) % 1000  # each agent ticks at its own phase of the second
    skew = dict(a.skew).get(node, 0)
    end_ms = T0_MS + a.seconds * 1000 + phase + skew
    db.execute("BEGIN")
    db.execute("INSERT INTO runs (started_ms, ended_ms, hostname, version, interval_ms, collectors) "
               "VALUES (?,?,?,?,?,?)", (T0_MS + skew, end_ms, f"gpu-{node:02d}", "synthetic", 1000,
                                       "diskstats,pressure,gpu,jobs"))
    uuids = [f"GPU-node{node:02d}-{g}" for g in range(gpus)]
    db.executemany("INSERT INTO gpus (uuid, gpu_index, name, first_seen_ms, last_seen_ms) VALUES (?,?,?,?,?)",
                   [(u, g, "Synthetic GPU", T0_MS, end_ms) for g, u in enumerate(uuids)])
    for i, name in enumerate(["loop1", "vda"]):
        db.execute("INSERT INTO block_devices (name, major, minor, kind, first_seen_ms, last_seen_ms) "
                   "VALUES (?,?,?,?,?,?)", (name, 7 if name == "loop1" else 252, i,
                                            "loop" if name == "loop1" else "disk", T0_MS, end_ms))
    labels = f"TORCHELASTIC_RUN_ID={RUN_ID},WORLD_SIZE={world}"
    if gpus == 1:
        labels += f",RANK={node}"
    db.execute("INSERT INTO jobs (job_key, label, root_pid, labels, gpus, started_ms, ended_ms, last_seen_ms) "
               "VALUES (?, 'python3 train.py', ?, ?, ?, ?, ?, ?)",
               (f"torchelastic:{RUN_ID}", 1000 + node, labels, ",".join(uuids), T0_MS + skew, end_ms, end_ms))
    db.execute("INSERT INTO job_devices SELECT 1, device_id, '', 100, ?, ? FROM block_devices WHERE name = 'loop1'",
               (T0_MS, end_ms))
    db.execute("INSERT INTO job_devices SELECT 1, device_id, 'loop1', 100, ?, ? FROM block_devices WHERE name = 'vda'",
               (T0_MS, end_ms))
    db.executemany("INSERT INTO job_ranks VALUES (1, ?, ?, ?, ?, ?)",
                   [(node * gpus + g, 2000 + node * gpus + g, u, T0_MS, end_ms) for g, u in enumerate(uuids)]
                   if gpus > 1 else [(node, 1000 + node, uuids[0], T0_MS, end_ms)])

    stalled_job = a.stall is not None
    here = a.stall_everywhere or (a.straggler == node)
    params = dict(n=a.seconds - 1, t0=T0_MS + phase + skew, s0=a.stall_at, s1=a.stall_at + a.stall_for - 1,
                  st=1 if stalled_job else 0, here=1 if here else 0, ds=1 if a.stall == "disk-slow" else 0,
                  sr=a.straggler_rank if not a.stall_everywhere else -1, g=gpus, base=node * gpus)
    series = "WITH RECURSIVE t(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM t WHERE i < :n), " \
             "r(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM r WHERE k < :g - 1) "

    def run(sql):
        db.execute(series + sql, params)

    in_stall = "(:st AND t.i BETWEEN :s0 AND :s1)"
    starving = f"({in_stall} AND :here AND (:sr < 0 OR r.k = :sr))"
    # Steps per interval: one rhythm of the run's time, on every node alike.
    steps = f"CASE WHEN {in_stall} THEN (t.i % 2) ELSE 8 + (t.i * 7 + t.i / 13) % 5 END"
    util = f"CASE WHEN {starving} THEN 2 + t.i % 3 ELSE 88 + (t.i * 5 + r.k * 3) % 9 END"
    work = f"CASE WHEN {in_stall} THEN 0 ELSE 30 + (t.i * 3 + r.k) % 11 END"
    wait = f"CASE WHEN {starving} THEN 0.9 ELSE 0.05 END"
    run(f"""INSERT INTO rank_samples (ts_ms, job_id, rank, interval_ms, processes, workers,
              read_bytes_per_second, write_bytes_per_second, main_cpu_ratio, workers_cpu_ratio,
              d_state_threads, steps, data_wait_seconds, step_seconds, gpu_util_percent, gpu_work_percent)
            SELECT :t0 + t.i * 1000, 1, :base + r.k, 1000, 5, 4,
              CASE WHEN {starving} THEN 1e6 ELSE 1e8 END, 1e6, 0.9, 1.1,
              CASE WHEN {starving} THEN 3 ELSE 0 END, {steps}, {wait}, 1 - {wait}, {util}, {work}
            FROM t, r WHERE :g > 1""")
    run(f"""INSERT INTO gpu_samples (ts_ms, gpu_id, interval_ms, utilization_percent,
              utilization_sample_count, memory_used_bytes, sm_clock_mhz, dram_active_percent)
            SELECT :t0 + t.i * 1000, r.k + 1, 1000, {util}, 6, 20000000000, 1980, {work} FROM t, r""")
    # The job on this node: its ranks' sums and means, as the recorder writes them.
    run(f"""INSERT INTO job_samples (ts_ms, job_id, interval_ms, processes, workers,
              read_bytes_per_second, write_bytes_per_second, rchar_per_second, read_syscalls_per_second,
              main_cpu_ratio, workers_cpu_ratio, d_state_threads, steps, samples, data_wait_seconds,
              step_seconds, gpu_util_percent, gpu_work_percent)
            SELECT :t0 + t.i * 1000, 1, 1000, 5 * :g, 4 * :g,
              sum(CASE WHEN {starving} THEN 1e6 ELSE 1e8 END), 1e6 * :g, 1e8 * :g, 3000,
              0.9 * :g, 1.1 * :g, sum(CASE WHEN {starving} THEN 3 ELSE 0 END), {steps} * :g, NULL,
              sum({wait}), sum(1 - {wait}), avg({util}), avg({work})
            FROM t, r GROUP BY t.i""")
    run(f"""INSERT INTO disk_samples SELECT :t0 + t.i * 1000, d.device_id, 1000, 2000, 50, 8e7, 2e5,
              CASE WHEN {in_stall} AND :here AND :ds THEN 40 + (t.i * 7) % 30 ELSE 0.3 + (t.i % 7) / 20.0 END,
              0.5, NULL, NULL, NULL, NULL,
              CASE WHEN {in_stall} AND :here AND :ds THEN 14 ELSE 0.4 END, 20, 1
            FROM t, block_devices d""")
    run("""INSERT INTO pressure_samples SELECT :t0 + t.i * 1000, 1000, p.resource,
              (t.i % 3) / 100.0, 0.0
            FROM t, (SELECT 'io' AS resource UNION ALL SELECT 'cpu') p""")
    db.execute("COMMIT")
    db.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--gpus", type=int, default=1, help="ranks (GPUs) per node")
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--stall", choices=["disk-slow", "not-storage"])
    ap.add_argument("--straggler", type=int, default=-1, help="the node that holds the job back")
    ap.add_argument("--straggler-rank", type=int, default=0, help="its local rank that starves")
    ap.add_argument("--stall-everywhere", action="store_true")
    ap.add_argument("--stall-at", type=int, default=300)
    ap.add_argument("--stall-for", type=int, default=30)
    ap.add_argument("--skew", action="append", default=[], type=lambda s: tuple(int(x) for x in s.split("=")),
                    help="NODE=MS: that node's clock is MS ahead")
    ap.add_argument("--skip", action="append", default=[], type=int, help="write no recording for this node")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for node in range(a.nodes):
        if node in a.skip:
            continue
        path = os.path.join(a.dir, f"node-{node:02d}.db")
        if os.path.exists(path):
            sys.exit(f"{path} exists; give a new directory")
        build_node(path, node, a)
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
