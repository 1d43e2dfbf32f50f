-- stallwatch database, schema version 11: what limits a job when it runs as it always does
-- (the bottleneck verdict), and what its processes did while it hung (see schema_v1.sql for
-- conventions).

-- The host's CPUs per interval (/proc/stat): cores' worth of busy time (user, nice, system, irq,
-- softirq, steal) and of I/O wait, and how many CPUs were online. A job's input pipeline could
-- use more workers only where cores were free.
CREATE TABLE cpu_samples (
  ts_ms        INTEGER NOT NULL,
  interval_ms  INTEGER NOT NULL,
  busy_cores   REAL    NOT NULL,
  iowait_cores REAL    NOT NULL,
  online_cpus  INTEGER NOT NULL
) STRICT;
CREATE INDEX cpu_samples_by_time ON cpu_samples (ts_ms);

-- The main thread of the job's main process (several ranks: the least busy one, the one a
-- synchronous job waits for), from its schedstat: its CPU (1.0 = one core) and the share of the
-- interval it sat runnable waiting for a CPU. A loop waiting for batches sleeps; one that is
-- CPU-bound itself, or spins on the GPU, runs.
ALTER TABLE job_samples ADD COLUMN main_thread_cpu_ratio REAL;
ALTER TABLE job_samples ADD COLUMN main_thread_runqueue_ratio REAL;
-- Where that thread slept, sampled ten times a second: the share of samples in the DataLoader's
-- result queue (poll on its workers' pipes, receiving a batch) and in a futex (CUDA's
-- synchronisation, or with pin_memory the pinned batches' queue: pin_memory 1 where PyTorch's
-- pinning thread runs). A job without the dataloader hook's input-wait share.
ALTER TABLE job_samples ADD COLUMN main_thread_loader_wait_ratio REAL;
ALTER TABLE job_samples ADD COLUMN main_thread_futex_wait_ratio REAL;
ALTER TABLE job_samples ADD COLUMN pin_memory INTEGER;
-- The job's processes stopped (state T or t) at the tick: a hang's workers, stopped.
ALTER TABLE job_samples ADD COLUMN stopped_processes INTEGER;
-- Where its workers sleep (S) once asleep for two ticks, the most common ('' while they run,
-- NULL before this version): what a worker waits on that is not I/O (a lock, a queue).
ALTER TABLE job_samples ADD COLUMN workers_sleep_wchan TEXT;
-- How many CPUs the job may use: its main process's affinity within the CPU quota of its
-- cgroup and of those above it.
ALTER TABLE job_samples ADD COLUMN cpus_allowed REAL;
-- The io.max limit nearest its use this interval, in cgroup_limits' words with the cgroup that
-- sets it, which may be above the job's own ("... in /sys/fs/cgroup/tenant (parent of the job's
-- cgroup)"); NULL when no read limit applies. From this version cgroup_limits also lists the
-- limits of the cgroups above the job's, and memory.max and memory.high.
ALTER TABLE job_samples ADD COLUMN cgroup_read_limit TEXT;

ALTER TABLE rank_samples ADD COLUMN main_thread_cpu_ratio REAL;
ALTER TABLE rank_samples ADD COLUMN main_thread_runqueue_ratio REAL;
ALTER TABLE rank_samples ADD COLUMN stopped_processes INTEGER;
ALTER TABLE rank_samples ADD COLUMN main_thread_loader_wait_ratio REAL;
ALTER TABLE rank_samples ADD COLUMN main_thread_futex_wait_ratio REAL;
ALTER TABLE rank_samples ADD COLUMN pin_memory INTEGER;
-- A rank's own cgroup (with those above it), where the ranks have cgroups of their own: its reads
-- against the nearest io.max and that limit, the share its CPU quota throttled it, its I/O
-- pressure. The straggler of a job whose ranks share GPUs, or that does not report, is named by
-- them.
ALTER TABLE rank_samples ADD COLUMN cgroup_limited_read_bytes_per_second REAL;
ALTER TABLE rank_samples ADD COLUMN cgroup_read_limit_bytes_per_second REAL;
ALTER TABLE rank_samples ADD COLUMN cgroup_cpu_throttled_ratio REAL;
ALTER TABLE rank_samples ADD COLUMN cgroup_io_some REAL;
