#!/usr/bin/env python3
"""Runs `stallwatch record` (its default collectors but the GPU's, 1 s interval, real SQLite
file, its /metrics scraped once a second unless --no-scrape) and Prometheus' node_exporter
(only its diskstats and pressure collectors, scraped once a second over loopback) side by side
for the same minute, then prints each one's CPU seconds,
CPU per one-second cycle and peak RSS. CPU is counted from the first to the last second of
the window (start-up excluded), summed over threads from /proc/<pid>/task/*/schedstat (ns); peak RSS is VmHWM.

Each is scraped over one kept connection, as Prometheus scrapes (HTTP keep-alive);
--new-connections opens one a scrape, as this bench did before 2026-11-26.

--cgroup-tree N adds N empty cgroups (N/10 parents of 10) under the cgroup2 mount for the run, as
a host's services, sessions and containers make them (a systemd host has tens to hundreds, a
Kubernetes node more); removed after. --cgroup-tree-io hands those cgroups the io controller (where
the mount's root has it), so that each has an io.stat, as under a Kubernetes node's kubepods.

--no-collectors runs the agent with every host collector and the drive health thread off: what
it costs only to wake for the scrape, render its own figures and write its intervals (the floor
under the default collectors' reads).

--vs OTHER --rounds N compares two builds on one machine: N windows of each, alternating, each
round's order swapped (ABBA...), each printed as a single run's, then per build the ratio's
median, range and pooled figure (CPU summed over the rounds) and the medians of the agent and
its threads. node_exporter's own cycle moves by up to 14 % between neighbouring windows on an
H200 host: compare builds only this way.

Usage: bench/record_vs_node_exporter.py [--seconds 60] [--stallwatch build/stallwatch]
       [--vs OTHER [--rounds N]] [--no-collectors] [--cgroup-tree N] [--agent-arg ARG ...]
       [--collector-costs]
Needs Debian's prometheus-node-exporter (scripts/install-deps.sh --bench)."""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import http.client

PORT = 19177
STALLWATCH_PORT = 19178


def thread_cpu_seconds(pid):
    """CPU time per thread in ns resolution (/proc/PID/task/TID/schedstat, first field)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0]) / 1e9
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                out[tid] = (f.read().strip(), out[tid])
        except OSError:
            pass  # the thread ended meanwhile
    return out


def cpu_seconds(pid):
    return sum(v[1] for v in thread_cpu_seconds(pid).values())


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    return None


def make_cgroup_tree(n, with_io):
    """N leaf cgroups under a folder of the cgroup2 mount (handed the io controller: WITH_IO);
    the folder, to remove."""
    mount = cgroup2_mount()
    if not mount:
        sys.exit("--cgroup-tree: no cgroup2 mount")
    top = os.path.join(mount, f"stallwatch-bench-{os.getpid()}")
    os.mkdir(top)

    def hand_io(d):
        try:
            with open(os.path.join(d, "cgroup.subtree_control"), "w") as f:
                f.write("+io")
        except OSError as e:
            remove_cgroup_tree(top)
            sys.exit(f"--cgroup-tree-io: cannot hand {d} the io controller ({e.strerror}): "
                     f"the io controller is not enabled at {mount}")

    if with_io:
        hand_io(top)
    for i in range(n):
        parent = os.path.join(top, f"parent{i // 10}")
        if not os.path.isdir(parent):
            os.mkdir(parent)
            if with_io:
                hand_io(parent)
        os.mkdir(os.path.join(parent, f"leaf{i}"))
    return top


def remove_cgroup_tree(top):
    for dirpath, dirnames, _ in os.walk(top, topdown=False):
        for d in dirnames:
            os.rmdir(os.path.join(dirpath, d))
    os.rmdir(top)


def run_once(args, binary, exporter_bin):
    """One window of BINARY beside node_exporter (EXPORTER_BIN), its report printed; returns its
    figures."""
    tmp = tempfile.mkdtemp(prefix="stallwatch-bench-")
    exporter = subprocess.Popen(
        [exporter_bin, "--collector.disable-defaults", "--collector.diskstats", "--collector.pressure",
         f"--web.listen-address=127.0.0.1:{PORT}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recorder = subprocess.Popen(
        [binary, "record", "--db", os.path.join(tmp, "sw.db"), "--interval", "1s",
         "--no-collector.gpu", "--log-level", "info" if args.collector_costs else "warn"]
        + args.agent_arg
        + ([] if args.no_scrape else ["--listen", f"127.0.0.1:{STALLWATCH_PORT}"])
        + ([f"--no-collector.{c}" for c in ("diskstats", "mounts", "pressure", "cpu", "jobs", "io_latency")]
           + ["--health-interval", "0s"] if args.no_collectors else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    scrape_ms = []
    page_bytes = 0
    try:
        time.sleep(2)  # both started and warmed up
        start = {p.pid: cpu_seconds(p.pid) for p in (exporter, recorder)}
        recorder_threads_start = thread_cpu_seconds(recorder.pid)
        t0 = time.monotonic()
        kept = {}

        def scrape(port):
            c = kept.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/metrics", headers={"Connection": "close"} if args.new_connections else {})
            body = c.getresponse().read()
            if args.new_connections:
                c.close()
            else:
                kept[port] = c
            return len(body)

        for i in range(args.seconds):  # bounded: one scrape per second
            s = time.monotonic()
            scrape(PORT)
            scrape_ms.append((time.monotonic() - s) * 1000)
            if not args.no_scrape:
                page_bytes = scrape(STALLWATCH_PORT)
            time.sleep(max(0.0, t0 + i + 1 - time.monotonic()))
        end = {p.pid: cpu_seconds(p.pid) for p in (exporter, recorder)}
        recorder_threads = thread_cpu_seconds(recorder.pid)
        rss = {p.pid: peak_rss_mb(p.pid) for p in (exporter, recorder)}
    finally:
        recorder.send_signal(signal.SIGTERM)
        exporter.terminate()
        _, err = recorder.communicate(timeout=10)
        exporter.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    if recorder.returncode != 0:
        raise SystemExit(f"stallwatch exited {recorder.returncode}: {err}")

    print(f"window: {args.seconds} s, 1 s interval / 1 scrape per second of each, on {os.uname().release}, "
          f"{os.cpu_count()} CPUs, " + ("a new connection a scrape" if args.new_connections else "connections kept") +
          ("; stallwatch not scraped" if args.no_scrape else
                                      f"; stallwatch's page {page_bytes} bytes") +
          ("; stallwatch with no collector" if args.no_collectors else "") +
          (f"; {args.cgroup_tree} more cgroups" if args.cgroup_tree else "") +
          (" with io" if args.cgroup_tree_io else ""))
    print(f"{'':28}{'CPU s':>8}{'CPU per cycle':>16}{'peak RSS':>11}")
    for name, p in (("stallwatch record", recorder), ("node_exporter (2 collectors)", exporter)):
        cpu = end[p.pid] - start[p.pid]
        print(f"{name:28}{cpu:>8.3f}{cpu / args.seconds * 1e6:>13.0f} us{rss[p.pid]:>8.1f} MB")
    agent_cpu = end[recorder.pid] - start[recorder.pid]
    exporter_cpu = end[exporter.pid] - start[exporter.pid]
    ratio = exporter_cpu / max(1e-9, agent_cpu)
    print(f"stallwatch / node_exporter CPU: {1 / ratio:.2f}x; node_exporter / stallwatch: {ratio:.1f}x; "
          f"node_exporter's scrape round trip median "
          f"{statistics.median(scrape_ms):.2f} ms")
    if args.collector_costs:
        print("stallwatch's own figures at exit (whole run, start-up included):")
        for line in err.splitlines():
            if "] collector " in line or "] cpu: " in line or "recorded " in line or line.startswith("PROBE"):
                print("  " + line.split("] ", 2)[-1])
    print("stallwatch per thread, same window:")
    threads = {}
    for tid, (comm, secs) in sorted(recorder_threads.items()):
        before = recorder_threads_start.get(tid, (comm, 0.0))[1]
        print(f"  {comm:16} {(secs - before) * 1e3:8.2f} ms = {(secs - before) / args.seconds * 1e6:6.0f} us per cycle")
        role = "main" if tid == str(recorder.pid) else comm  # the main thread is named after the binary
        threads[role] = threads.get(role, 0.0) + (secs - before) / args.seconds * 1e6
    return {"agent_us": agent_cpu / args.seconds * 1e6, "exporter_us": exporter_cpu / args.seconds * 1e6,
            "threads_us": threads}


def summarize(runs, binaries):
    """Per binary over its runs: the ratio's median, range and pooled figure (the agent's CPU
    summed over node_exporter's), and the median of the whole agent and of each thread."""
    print(f"== {len(runs[binaries[0]])} runs each, each round's order swapped; us of CPU a cycle, medians")
    for b in binaries:
        rs = runs[b]
        ratios = [r["agent_us"] / r["exporter_us"] for r in rs]
        pooled = sum(r["agent_us"] for r in rs) / sum(r["exporter_us"] for r in rs)
        comms = sorted({c for r in rs for c in r["threads_us"]})
        medians = {c: statistics.median(r["threads_us"].get(c, 0.0) for r in rs) for c in comms}
        per_thread = ", ".join(f"{c} {m:.0f}" for c, m in medians.items() if m >= 0.5)  # idle ones left out
        print(f"{b}: ratio median {statistics.median(ratios):.3f}x (pooled {pooled:.3f}x, "
              f"{min(ratios):.3f}-{max(ratios):.3f}); agent {statistics.median(r['agent_us'] for r in rs):.0f}, "
              f"node_exporter {statistics.median(r['exporter_us'] for r in rs):.0f}; {per_thread}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--stallwatch", default=os.path.join(os.path.dirname(__file__), "..", "build", "stallwatch"))
    ap.add_argument("--vs", metavar="OTHER", help="a second stallwatch binary, run alternately with --stallwatch")
    ap.add_argument("--rounds", type=int, default=1,
                    help="windows of each binary, each round's order swapped (default 1)")
    ap.add_argument("--no-scrape", action="store_true", help="leave stallwatch's /metrics unserved")
    ap.add_argument("--new-connections", action="store_true", help="a new connection for each scrape")
    ap.add_argument("--no-collectors", action="store_true",
                    help="every host collector and the health thread off: the agent's floor")
    ap.add_argument("--agent-arg", action="append", default=[],
                    help="one more argument for `stallwatch record` (repeatable), e.g. --no-collector.jobs")
    ap.add_argument("--cgroup-tree", type=int, default=0, metavar="N",
                    help="N more cgroups under the cgroup2 mount for the run (removed after)")
    ap.add_argument("--cgroup-tree-io", action="store_true",
                    help="hand --cgroup-tree's cgroups the io controller")
    ap.add_argument("--collector-costs", action="store_true",
                    help="print the agent's exit report of each collector's cost")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds < 1:
        ap.error("--rounds and --seconds must be at least 1")
    exporter_bin = shutil.which("prometheus-node-exporter")
    if not exporter_bin:
        sys.exit("prometheus-node-exporter is not installed: run scripts/install-deps.sh --bench")
    binaries = [args.stallwatch] + ([args.vs] if args.vs else [])
    for b in binaries:
        if not os.access(b, os.X_OK):
            sys.exit(f"{b}: not an executable file")

    tree = make_cgroup_tree(args.cgroup_tree, args.cgroup_tree_io) if args.cgroup_tree else None
    runs = {b: [] for b in binaries}
    try:
        for r in range(args.rounds):
            for b in (binaries if r % 2 == 0 else binaries[::-1]):
                if len(binaries) > 1 or args.rounds > 1:
                    print(f"== {b} (round {r + 1} of {args.rounds})", flush=True)
                runs[b].append(run_once(args, b, exporter_bin))
    finally:
        if tree:
            remove_cgroup_tree(tree)
    if len(binaries) > 1 or args.rounds > 1:
        summarize(runs, binaries)

if __name__ == "__main__":
    main()
