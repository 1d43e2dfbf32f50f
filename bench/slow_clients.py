#!/usr/bin/env python3
"""The metrics endpoint with slow clients (issue 19, case 2): `stallwatch replay --listen` of a
committed recording, 20 scrapes alone, then 20 scrapes while 8 clients trickle a header line
each every 0.2 s. Prints the scrape latency, median and max, both ways.

Usage: bench/slow_clients.py [STALLWATCH_BINARY]   (from the repository root)"""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/stallwatch"
RECORDING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                         "recordings", "h100-disk.db")


def main():
    tmp = tempfile.mkdtemp(prefix="stallwatch-slow-")
    db = os.path.join(tmp, "r.db")
    shutil.copy(RECORDING, db)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = subprocess.Popen([BIN, "replay", "--db", db, "--speed", "1", "--listen", f"127.0.0.1:{port}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    for line in agent.stderr:
        if "metrics on port" in line:
            break
    while True:  # the replay's first interval published
        try:
            if b"stallwatch_" in urllib.request.urlopen(url, timeout=5).read():
                break
        except OSError:
            pass
        time.sleep(0.2)

    def scrape():
        t = time.monotonic()
        urllib.request.urlopen(url, timeout=10).read()
        return (time.monotonic() - t) * 1e3

    alone = [scrape() for _ in range(20)]
    slow = []
    for _ in range(8):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /metrics HTTP/1.1\r\n")
        slow.append(c)
    beside = []
    for _ in range(20):
        for c in slow:
            try:
                c.sendall(b"X-Slow: 1\r\n")
            except OSError:
                pass
        beside.append(scrape())
        time.sleep(0.2)
    print(f"scrape latency, median / max: alone {statistics.median(alone):.2f} / {max(alone):.2f} ms; "
          f"with 8 slow clients {statistics.median(beside):.2f} / {max(beside):.2f} ms")
    agent.terminate()
    agent.wait()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
