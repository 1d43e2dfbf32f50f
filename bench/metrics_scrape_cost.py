#!/usr/bin/env python3
"""The CPU one scrape of /metrics costs the agent, split into what the page's rendering costs
and what serving it does (accept, read the request, send the page, close):

  served:   the same snapshot scraped again and again (--interval 5s: the page is rendered
            once and served from its cache about 45 times);
  rendered: a new snapshot before every scrape (--interval 100ms), so that each one renders
            the page and reads the agent's own process figures.
Both scrape every 100 ms, N scrapes: the thread wakes cold for each, as it does for a
Prometheus scraping every few seconds (back to back, a cached page cost a quarter as much).

Both runs use `stallwatch record` with its default collectors but the GPU's, on a real SQLite
file. The endpoint is served by the recorder's own loop (since 2026-11-27; a thread of its own,
sw-metrics, before): a scrape's cost is the process's CPU over the scrapes less its CPU over as
long a window just before without them, from /proc/PID/task/*/schedstat (ns). Prints the median
of --runs alternating pairs.

Usage: bench/metrics_scrape_cost.py [--stallwatch build/stallwatch] [--runs 3] [--scrapes 100]"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request

PORT = 19179


def process_cpu(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # the thread ended meanwhile
    return total / 1e9


def scrape():
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5) as r:
        return len(r.read())


def measure(binary, interval, scrapes, pause):
    tmp = tempfile.mkdtemp(prefix="stallwatch-scrape-")
    agent = subprocess.Popen(
        [binary, "record", "--db", os.path.join(tmp, "sw.db"), "--interval", interval,
         "--no-collector.gpu", "--log-level", "warn", "--listen", f"127.0.0.1:{PORT}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        size = 0
        while time.monotonic() < deadline:  # the first snapshot published
            try:
                size = scrape()
                if size > 0:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if size == 0:
            raise RuntimeError("the agent published no page")
        time.sleep(0.5)
        quiet_start, quiet_cpu = time.monotonic(), process_cpu(agent.pid)
        time.sleep(scrapes * pause)
        quiet = (process_cpu(agent.pid) - quiet_cpu) / (time.monotonic() - quiet_start)
        start, before = time.monotonic(), process_cpu(agent.pid)
        for _ in range(scrapes):
            scrape()
            if pause:
                time.sleep(pause)
        spent = process_cpu(agent.pid) - before - quiet * (time.monotonic() - start)
        return spent / scrapes * 1e6, size
    finally:
        agent.terminate()
        agent.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stallwatch", default=os.path.join(os.path.dirname(__file__), "..", "build", "stallwatch"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scrapes", type=int, default=100)
    args = ap.parse_args()
    served, rendered, size = [], [], 0
    for _ in range(args.runs):
        us, size = measure(args.stallwatch, "5s", args.scrapes, 0.1)
        served.append(us)
        us, _ = measure(args.stallwatch, "100ms", args.scrapes, 0.1)
        rendered.append(us)
    s, r = statistics.median(served), statistics.median(rendered)
    print(f"page: {size} bytes; runs: {args.runs}")
    print(f"served from the cache: {s:.0f} us a scrape (runs: {', '.join(f'{x:.0f}' for x in served)})")
    print(f"rendered for the scrape: {r:.0f} us a scrape (runs: {', '.join(f'{x:.0f}' for x in rendered)})")
    print(f"the rendering (page and own process figures): {r - s:.0f} us")


if __name__ == "__main__":
    main()
