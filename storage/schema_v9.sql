-- stallwatch database, schema version 9: who else used the job's devices (noisy neighbours),
-- so that a slow device is explained by its other users too (see schema_v1.sql for conventions).

-- On the intervals where it was read (every discovery period, 5 s by default): the other leaf
-- cgroups that read or wrote the job's devices, heaviest first, at most 3 per device, one a
-- line: "DEVICE<TAB>CGROUP<TAB>READ_BYTES_PER_SECOND<TAB>WRITE_BYTES_PER_SECOND". '' when none
-- did (1 MB/s or more), NULL where it was not read.
ALTER TABLE job_samples ADD COLUMN neighbour_io TEXT;
