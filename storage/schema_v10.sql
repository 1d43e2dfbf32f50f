-- stallwatch database, schema version 10: where an idle job waits (see schema_v1.sql for
-- conventions).

-- The kernel function the job's main process's main thread sleeps in (S, asleep for two ticks
-- or more; several ranks: the most common), NULL while it runs: a job hung with every thread
-- asleep says what it waits on (a lock, a poll, a pipe), not a bare not-storage.
ALTER TABLE job_samples ADD COLUMN sleep_wchan TEXT;

-- From this version, neighbour_io (schema 9) may also name processes, where cgroups cannot tell
-- the users of a device apart: its CGROUP field is then "process COMM" (cgroup paths start
-- with '/'), the processes of that command name summed.
