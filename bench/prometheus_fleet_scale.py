#!/usr/bin/env python3
"""The fleet post-mortem read from Prometheus at scale (issue 35): a synthetic run of NODES nodes
x 8 GPUs over HOURS at a 15 s scrape, written as OpenMetrics text in the families the agents
export (docs/PROMETHEUS.md), backfilled into a TSDB with promtool (`tsdb create-blocks-from
openmetrics`), served by Debian's Prometheus; one node's disk made slow for ten minutes in the
middle. `stallwatch report --prometheus` must name that node, its rank and device; it prints
its wall time and peak RSS, and the server's answer sizes.

Usage: bench/prometheus_fleet_scale.py BUILD/stallwatch [NODES [HOURS]]   (default 256 6)
Needs: prometheus, promtool (scripts/install-deps.sh installs them). Takes a few minutes and
about 3 GB of disk under $TMPDIR (13 GB at 1 000 nodes, while the OpenMetrics text is backfilled).
With SW_SCALE_TSDB=DIR the TSDB is kept in DIR and, on the next run of the same size, reused (the
report timed again without writing and backfilling it again).
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/stallwatch"
NODES = int(sys.argv[2]) if len(sys.argv) > 2 else 256
HOURS = float(sys.argv[3]) if len(sys.argv) > 3 else 6
GPUS = 8
STEP = 15
RUN = "slurm:9001"
STRAGGLER = NODES * 137 // 256  # node index whose disk gets slow
STALL = (0.5, 0.5 + 10 / 60 / HOURS)  # the ten minutes from the middle, as shares of the span


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_openmetrics(path, start):
    steps = int(HOURS * 3600 / STEP)
    stall = range(int(steps * STALL[0]), int(steps * STALL[1]))
    rnd = random.Random(7)
    noise = [rnd.uniform(-0.04, 0.04) for _ in range(4096)]
    names = [f"n{n:03d}" for n in range(NODES)]

    def base(n):
        return f'instance="{names[n]}:9101",job="stallwatch"'

    def job(n):
        return f'{base(n)},training_job="slurm:9001"'

    samples = 0
    with open(path, "w", buffering=1 << 22) as out:
        def family(name, series, kind="gauge"):
            # series: [(labels, value_at(k))]
            nonlocal samples
            out.write(f"# TYPE {name.removesuffix('_total') if kind == 'counter' else name} {kind}\n")
            for labels, value_at in series:
                prefix = f"{name}{{{labels}}} "
                out.write("".join(f"{prefix}{value_at(k):.4g} {start + k * STEP}\n" for k in range(steps)))
                samples += steps

        def slow(n, k):
            return n == STRAGGLER and k in stall

        def stalled(k):
            return k in stall

        family("stallwatch_run_job_info",
               [(f'{job(n)},run="{RUN}",node="{names[n]}",world_size="{NODES * GPUS}"', lambda k: 1)
                for n in range(NODES)])
        family("stallwatch_job_steps_per_second",
               [(job(n), lambda k: (0.3 if stalled(k) else 4.0) * (1 + noise[k % 4096])) for n in range(NODES)])
        family("stallwatch_job_gpu_utilization_ratio",
               [(job(n), (lambda k, n=n: 0.05 if slow(n, k) else (0.98 if stalled(k) else 0.7 + noise[(k + n) % 4096])))
                for n in range(NODES)])
        family("stallwatch_job_read_bytes_per_second",
               [(job(n), (lambda k, n=n: 2e6 if slow(n, k) else 2e8 * (1 + noise[(k + 3 * n) % 4096]))) for n in range(NODES)])
        family("stallwatch_job_uninterruptible_threads",
               [(job(n), (lambda k, n=n: 8 if slow(n, k) else 0)) for n in range(NODES)])
        family("stallwatch_job_gpus", [(job(n), lambda k: GPUS) for n in range(NODES)])
        family("stallwatch_job_device_info", [(f'{job(n)},device="nvme0n1",via=""', lambda k: 1) for n in range(NODES)])
        family("stallwatch_rank_gpu_utilization_ratio",
               [(f'{base(n)},run="{RUN}",rank="{n * GPUS + g}",node="{names[n]}"',
                 (lambda k, n=n, g=g: 0.05 if slow(n, k) else (0.98 if stalled(k) else 0.7 + noise[(k + n + g) % 4096])))
                for n in range(NODES) for g in range(GPUS)])
        family("stallwatch_disk_read_await_seconds",
               [(f'{base(n)},device="nvme0n1"', (lambda k, n=n: 0.05 if slow(n, k) else 0.0003 * (1 + noise[(k + n) % 4096])))
                for n in range(NODES)])
        family("stallwatch_disk_queue_length",
               [(f'{base(n)},device="nvme0n1"', (lambda k, n=n: 8 if slow(n, k) else 0.6 * (1 + noise[(k + n) % 4096])))
                for n in range(NODES)])
        family("stallwatch_pressure_some_ratio",
               [(f'{base(n)},resource="io"', (lambda k, n=n: 0.8 if slow(n, k) else 0.03)) for n in range(NODES)])
        # The agents' own counter of one-second intervals: the report's times are shifted back
        # by the interval it rises at.
        family("stallwatch_intervals_total",
               [(base(n), (lambda k, n=n: 5000 + n + k * STEP)) for n in range(NODES)], "counter")
        out.write("# EOF\n")
    return samples, steps


def main():
    kept = os.environ.get("SW_SCALE_TSDB")
    tmp = kept or tempfile.mkdtemp(prefix="sw-prom-scale-")
    stamp = os.path.join(tmp, "run.json")
    prom = None
    try:
        reuse = None
        if kept and os.path.exists(stamp):
            with open(stamp) as f:
                reuse = json.load(f)
            if (reuse["nodes"], reuse["hours"]) != (NODES, HOURS):
                sys.exit(f"{tmp} holds a run of {reuse['nodes']} nodes x {reuse['hours']} h: remove it first")
        if reuse:
            start, steps = reuse["start"], reuse["steps"]
            print(f"synthetic run: {NODES} nodes x {GPUS} GPUs x {HOURS:g} h at {STEP} s: the TSDB in {tmp} reused")
        else:
            os.makedirs(tmp, exist_ok=True)
            start = (int(time.time()) - int(HOURS * 3600) - 7200) // 3600 * 3600
            om = os.path.join(tmp, "run.om")
            t = time.monotonic()
            samples, steps = write_openmetrics(om, start)
            print(f"synthetic run: {NODES} nodes x {GPUS} GPUs x {HOURS:g} h at {STEP} s: {samples / 1e6:.1f} M "
                  f"samples, {os.path.getsize(om) / 1e6:.0f} MB of OpenMetrics ({time.monotonic() - t:.0f} s to write)")
            t = time.monotonic()
            subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", om, os.path.join(tmp, "tsdb")],
                           check=True, stdout=subprocess.DEVNULL)
            os.remove(om)
            print(f"backfilled with promtool in {time.monotonic() - t:.0f} s")
            if kept:
                with open(stamp, "w") as f:
                    json.dump({"nodes": NODES, "hours": HOURS, "start": start, "steps": steps}, f)
        port = free_port()
        prom = subprocess.Popen(["prometheus", "--config.file=/dev/null", f"--web.listen-address=127.0.0.1:{port}",
                                 f"--storage.tsdb.path={tmp}/tsdb", "--storage.tsdb.retention.time=3650d",
                                 "--query.max-samples=200000000"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/-/ready", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        end = start + steps * STEP
        for label, extra in (("step found from the data", []), ("--prometheus-step 15s", ["--prometheus-step", "15s"])):
            cmd = ["/usr/bin/time", "-f", "%e %M %U %S", BIN, "report", "--json", "--prometheus", url, "--run", RUN,
                   "--since", str(start - 600), "--until", str(end + 600), *extra]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr[-3000:])
                sys.exit(1)
            wall, rss_kb, user, system = r.stderr.strip().splitlines()[-1].split()
            read = next(line for line in r.stderr.splitlines() if line.startswith("read "))
            report = json.loads(r.stdout)["runs"][0]
            incidents = report["incidents"]
            named = [(i["straggler_node"], (i["straggler"] or {}).get("rank"), i["class"], i["device"],
                      (i["end_ms"] - i["start_ms"]) / 1000) for i in incidents]
            print(f"report --prometheus ({label}): {float(wall):.1f} s wall, {float(user) + float(system):.1f} s CPU, "
                  f"peak RSS {int(rss_kb) / 1024:.0f} MiB; "
                  f"{read.split(': ', 1)[1]}; {len(report['nodes'])} nodes, {report['intervals']} intervals of "
                  f"{report['interval_ms'] / 1000:g} s; incidents: {named}")
            want = f"n{STRAGGLER:03d}"
            ok = len(incidents) == 1 and incidents[0]["straggler_node"] == want and incidents[0]["device"] == "nvme0n1"
            print(f"  {'named' if ok else 'DID NOT NAME'} {want} (nvme0n1) as the node that held the run back")
            if incidents:  # the report's interval ends at the first slow scrape, less the agents' 1 s
                first_slow_ms = (start + int(steps * STALL[0]) * STEP) * 1000
                print(f"  its start {(incidents[0]['start_ms'] - first_slow_ms) / 1000:+g} s from the first slow scrape")
            if not ok:
                sys.exit(1)
    finally:
        if prom:
            prom.terminate()
            prom.wait()
        if not kept:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
