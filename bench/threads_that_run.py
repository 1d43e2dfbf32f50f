"""How many of a running job's threads run in each second, and how many descriptors its
processes hold: the figures behind the jobs collector's choices (collectors/jobs/process_watch.h,
open_files_per_discovery in collectors/jobs/jobs.h).
For every process whose command line holds PATTERN (and its children), reads each thread's
/proc/PID/task/TID/schedstat once a second for SECONDS and prints, per process, its threads and
the median number that ran in a second, and for the whole job the threads that never ran.
Usage: python3 bench/threads_that_run.py PATTERN [SECONDS=10]"""
import os
import statistics
import sys
import time


def processes(pattern):
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if pattern.encode() in f.read():
                    found.add(int(pid))
        except OSError:
            pass
    for pid in list(found):  # DataLoader workers run the same command line; children anyway
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                found.update(int(c) for c in f.read().split())
        except OSError:
            pass
    return sorted(found)


def schedstats(pid):
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    out[tid] = f.read()
            except OSError:
                pass
    except OSError:
        pass
    return out


def main():
    pattern = sys.argv[1]
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    pids = processes(pattern)
    last = {pid: schedstats(pid) for pid in pids}
    ran = {pid: [] for pid in pids}
    ever = {pid: set() for pid in pids}
    for _ in range(seconds):
        time.sleep(1)
        for pid in pids:
            now = schedstats(pid)
            moved = {t for t, s in now.items() if last[pid].get(t) not in (None, s)}
            ran[pid].append(len(moved))
            ever[pid] |= moved
            last[pid] = now
    total = never = total_fds = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            comm = "(exited)"
        threads = len(last[pid])
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            fds = 0
        total_fds += fds
        total += threads
        never += threads - len(ever[pid])
        print(f"{pid} {comm}: {threads} threads, a median of {statistics.median(ran[pid] or [0]):.0f} "
              f"ran in a second, {threads - len(ever[pid])} never ran in {seconds} s, {fds} descriptors")
    print(f"job: {len(pids)} processes, {total} threads, {never} never ran in {seconds} s, "
          f"{total_fds} descriptors")


if __name__ == "__main__":
    main()
