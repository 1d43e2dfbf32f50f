#!/usr/bin/env python3
"""The jobs collector against many dataloader senders (issue 19, case 3): `stallwatch record`
with its dataloader socket, and
  1. 10, 100 and 1 000 live processes that have each sent one datagram (each its own job, as
     unrelated senders are): the agent's CPU per one-second tick at each level;
  2. 2 000 short-lived senders over 20 s (a datagram each, then exit): how late the agent's
     ticks were meanwhile (the largest gap between consecutive samples, against the 1 s
     interval) and how many jobs the recording holds.
Senders are forked from this process (no interpreter start-up per sender), so the figures are
the agent's, not the load generator's.

Usage: bench/many_senders.py [STALLWATCH_BINARY]   (Linux, PSI optional; writes under /tmp)"""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "build", "stallwatch")
LINE = b"stallwatch.dataloader.steps:1|c\nstallwatch.dataloader.wait:5.0|ms\nstallwatch.dataloader.step:20.0|ms\n"


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(LINE, path)
    except OSError:
        pass
    s.close()


def live_children(n, path):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            send(path)
            signal.pause()
            os._exit(0)
        pids.append(pid)
    return pids


def main():
    tmp = tempfile.mkdtemp(prefix="stallwatch-senders-")
    db, sock_dir = os.path.join(tmp, "sw.db"), os.path.join(tmp, "sock")
    os.mkdir(sock_dir, 0o755)
    path = os.path.join(sock_dir, "dl.sock")
    agent = subprocess.Popen([BIN, "record", "--db", db, "--interval", "1s", "--flush-interval", "1s",
                              "--no-collector.gpu", "--socket", path], stderr=subprocess.PIPE, text=True)
    while not os.path.exists(path):
        time.sleep(0.05)
    time.sleep(2)
    for n in (10, 100, 1000):
        pids = live_children(n, path)
        time.sleep(6)  # discovered (every 5 ticks) and followed
        c0, t0 = cpu_s(agent.pid), time.monotonic()
        time.sleep(10)
        per_tick_ms = (cpu_s(agent.pid) - c0) * 1000 / (time.monotonic() - t0)
        print(f"{n:5d} live senders: agent {per_tick_ms:.2f} ms CPU per 1 s tick")
        for p in pids:
            os.kill(p, signal.SIGTERM)
        for p in pids:
            os.waitpid(p, 0)
    start_ms = int(time.time() * 1000)
    t_end = time.monotonic() + 20
    spawned = 0
    t_start = time.monotonic()
    while time.monotonic() < t_end:
        # On schedule: 100 senders a second, 2 000 in all, however long each fork takes.
        while spawned < min(2000, int((time.monotonic() - t_start) * 100) + 1):
            pid = os.fork()
            if pid == 0:
                send(path)
                os._exit(0)
            spawned += 1
        while True:  # reap what has exited
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.01)
    end_ms = int(time.time() * 1000)
    time.sleep(3)
    agent.send_signal(signal.SIGTERM)
    _, err = agent.communicate(timeout=60)
    con = sqlite3.connect(db)
    ts = [r[0] for r in con.execute("SELECT DISTINCT ts_ms FROM pressure_samples WHERE ts_ms BETWEEN ? AND ? "
                                     "ORDER BY ts_ms", (start_ms, end_ms))]
    if not ts:  # no PSI on this host: the disk samples keep the ticks
        ts = [r[0] for r in con.execute("SELECT DISTINCT ts_ms FROM disk_samples WHERE ts_ms BETWEEN ? AND ? "
                                         "ORDER BY ts_ms", (start_ms, end_ms))]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    jobs = con.execute("SELECT count(*) FROM jobs").fetchone()[0]
    print(f"{spawned} short-lived senders over 20 s: {len(ts)} ticks, largest gap {max(gaps) if gaps else 0} ms "
          f"(interval 1000 ms: the latest tick {max(gaps) - 1000 if gaps else 0} ms late), {jobs} jobs recorded")
    for line in err.splitlines():
        if "dataloader socket:" in line or "collector jobs" in line:
            print(line.split("] ", 2)[-1])


if __name__ == "__main__":
    main()
