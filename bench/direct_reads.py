#!/usr/bin/env python3
"""4 KiB random reads with O_DIRECT at queue depth 1 from DEVICE for SECONDS; prints how many.
A load for bench/io_latency_cost_gpu_host.sh where fio is not installed (the in-kernel cost it
measures does not depend on the reader's own speed).
Usage: bench/direct_reads.py DEVICE SECONDS"""
import mmap
import os
import random
import sys
import time

device, seconds = sys.argv[1], float(sys.argv[2])
fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
blocks = max(1, min(size, 1 << 30) // 4096)  # the first GiB: reads, never writes
buf = mmap.mmap(-1, 4096)
rnd = random.Random(1)
n = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    for _ in range(256):
        os.preadv(fd, [buf], rnd.randrange(blocks) * 4096)
    n += 256
os.close(fd)
print(n)
