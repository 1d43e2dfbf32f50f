-- stallwatch database, schema version 8: the job's own cgroup (v2), so that a throttle is
-- named rather than inferred from the node's pressure (see schema_v1.sql for conventions).

-- The limits set on the job's cgroups, for people: "io.max 254:0 (vda) rbps=4.0 MiB/s in
-- /sys/fs/cgroup/job; cpu.max 50000 100000 (0.50 CPU) in ..."; NULL when none is set.
ALTER TABLE jobs ADD COLUMN cgroup_limits TEXT;

-- Per interval, where the job has a cgroup of its own: its pressure shares (the highest over
-- its cgroups), the share of the interval its CPU quota throttled it, and the reads of the
-- cgroup nearest its io.max limit on the limited device, with that limit (bytes/s).
ALTER TABLE job_samples ADD COLUMN cgroup_io_some REAL;
ALTER TABLE job_samples ADD COLUMN cgroup_cpu_some REAL;
ALTER TABLE job_samples ADD COLUMN cgroup_memory_some REAL;
ALTER TABLE job_samples ADD COLUMN cgroup_cpu_throttled_ratio REAL;
ALTER TABLE job_samples ADD COLUMN cgroup_limited_read_bytes_per_second REAL;
ALTER TABLE job_samples ADD COLUMN cgroup_read_limit_bytes_per_second REAL;
-- The limits in force from this interval on, written when they change ('' when they were
-- lifted), NULL while they stay as the row before said: a post-mortem names the limit that
-- held the job then, not the one left at the end.
ALTER TABLE job_samples ADD COLUMN cgroup_limits TEXT;
