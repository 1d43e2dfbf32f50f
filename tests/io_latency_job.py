"""A job whose input is many small reads, for the per-I/O latency tests (issue 33): 4 threads
read 32 random 4 KiB samples a step with O_DIRECT (every read reaches the device), then the
step computes for 2 ms; it reports through the dataloader hook. A batch waits for its slowest
read.  python3 io_latency_job.py SECONDS FILE"""
import mmap, os, random, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import stallwatch
duration, path = float(sys.argv[1]), sys.argv[2]
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
blocks = os.fstat(fd).st_size // 4096
pool = ThreadPoolExecutor(4)
local = threading.local()
def read_sample(_):
    if not hasattr(local, "buf"):
        local.buf = mmap.mmap(-1, 4096)
    os.preadv(fd, [local.buf], random.randrange(blocks) * 4096)
def batches():
    end = time.time() + duration
    while time.time() < end:
        list(pool.map(read_sample, range(32)))
        yield 32
for batch in stallwatch.watch(batches()):
    time.sleep(0.002)
