#!/usr/bin/env python3
"""Cost per step of stallwatch.watch() over a plain loop, with no agent listening and with a
real agent receiving; and of the zero-code wrapper that `stallwatch run` puts around every
DataLoader iterator (stallwatch/auto.py's _Watched, with autograd's flag read each batch as on
torch). Each figure is the median of 7 runs of 200 000 steps, minus the same loop without
them. Targets (issue 3): at most 5 us (agent down) and 20 us (agent up).

Usage: bench/dataloader_overhead.py [--stallwatch build/stallwatch]"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import stallwatch  # noqa: E402

STEPS = 200_000
RUNS = 7


def per_step(fn):
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / STEPS)
    return statistics.median(times)


def plain():
    for _ in range(STEPS):
        pass


def watched(reporter):
    def run():
        for _ in stallwatch.watch(range(STEPS), reporter=reporter):
            pass
    return run


def auto_wrapped(reporter):
    from stallwatch import auto

    def run():
        it = auto._Watched(iter(range(STEPS)), reporter, lambda: True, stallwatch._batch_size)
        for _ in it:
            pass
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stallwatch", default=os.path.join(os.path.dirname(__file__), "..", "build", "stallwatch"))
    args = ap.parse_args()
    base = per_step(plain)
    down = stallwatch.Reporter(socket_path="/nonexistent/stallwatch.sock")
    cost_down = per_step(watched(down)) - base

    tmp = tempfile.mkdtemp()
    sock = os.path.join(tmp, "s.sock")
    agent = subprocess.Popen([args.stallwatch, "record", "--db", os.path.join(tmp, "sw.db"),
                              "--socket", sock, "--no-collector.gpu", "--log-level", "warn"])
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        up = stallwatch.Reporter(socket_path=sock)
        cost_up = per_step(watched(up)) - base
        # The same with a flush (one datagram) on every step: the worst case of a slow loop.
        every = stallwatch.Reporter(socket_path=sock, flush_seconds=0)
        cost_every = per_step(watched(every)) - base
        auto_up = stallwatch.Reporter(socket_path=sock)
        cost_auto = per_step(auto_wrapped(auto_up)) - base
    finally:
        agent.terminate()
        agent.wait()
    print(f"python {sys.version.split()[0]}, {STEPS} steps x {RUNS} runs, medians")
    print(f"plain loop:                           {base * 1e6:6.3f} us/step")
    print(f"watch(), no agent:                   +{cost_down * 1e6:6.3f} us/step  (sent {down.sent}, dropped {down.dropped})")
    print(f"watch(), agent up, 0.1 s flushes:    +{cost_up * 1e6:6.3f} us/step  (sent {up.sent} datagrams)")
    print(f"watch(), agent up, datagram per step:+{cost_every * 1e6:6.3f} us/step  (sent {every.sent})")
    print(f"stallwatch run's wrapper, agent up:  +{cost_auto * 1e6:6.3f} us/step  (sent {auto_up.sent} datagrams)")


if __name__ == "__main__":
    main()
