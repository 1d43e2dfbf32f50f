-- stallwatch database, schema version 2: training jobs (see schema_v1.sql for conventions).

-- One row per job: the processes of one training run, found by GPU use, the dataloader
-- socket, --pid or --cgroup. ended_ms is NULL while it runs (or if the agent stopped first).
CREATE TABLE jobs (
  job_id        INTEGER PRIMARY KEY,
  job_key       TEXT    NOT NULL UNIQUE,  -- slurm:ID, torchelastic:ID, cgroup:PATH, pid:PID:START
  label         TEXT,                     -- short command line
  root_pid      INTEGER NOT NULL,
  cmdline       TEXT,
  labels        TEXT,                     -- SLURM_JOB_ID=..,RANK=.. from the environment
  gpus          TEXT,                     -- comma-separated GPU UUIDs
  started_ms    INTEGER NOT NULL,
  ended_ms      INTEGER,
  last_seen_ms  INTEGER NOT NULL
) STRICT;

-- Per job per interval.
CREATE TABLE job_samples (
  ts_ms                    INTEGER NOT NULL,
  job_id                   INTEGER NOT NULL REFERENCES jobs (job_id),
  interval_ms              INTEGER NOT NULL,
  processes                INTEGER NOT NULL,
  workers                  INTEGER NOT NULL,
  read_bytes_per_second    REAL,   -- from storage (block layer), all the job's processes
  write_bytes_per_second   REAL,
  rchar_per_second         REAL,   -- through read syscalls, page cache included
  read_syscalls_per_second REAL,
  main_cpu_ratio           REAL,   -- CPU of the main process(es); 1.0 = one core
  workers_cpu_ratio        REAL,   -- summed over the other processes (dataloader workers)
  d_state_threads          INTEGER NOT NULL,  -- threads in uninterruptible sleep at ts_ms
  top_wchan                TEXT,   -- where most of them wait
  steps                    INTEGER,  -- dataloader socket: NULL where the job does not report
  samples                  INTEGER,
  data_wait_seconds        REAL,   -- time the loop waited for its next batch
  step_seconds             REAL    -- time spent in the steps
) STRICT;
CREATE INDEX job_samples_by_job_time ON job_samples (job_id, ts_ms);

-- "This job reads from this device": a file the job had open lives on it. via: the device
-- the file itself was on, when this row is a device underneath it (the disk under a loop).
CREATE TABLE job_devices (
  job_id           INTEGER NOT NULL REFERENCES jobs (job_id),
  device_id        INTEGER NOT NULL REFERENCES block_devices (device_id),
  via              TEXT    NOT NULL DEFAULT '',
  open_files_seen  INTEGER NOT NULL,   -- summed over the scans that saw it
  first_seen_ms    INTEGER NOT NULL,
  last_seen_ms     INTEGER NOT NULL,
  PRIMARY KEY (job_id, device_id, via)
) STRICT;

CREATE TABLE job_processes (
  job_id        INTEGER NOT NULL REFERENCES jobs (job_id),
  pid           INTEGER NOT NULL,
  role          TEXT    NOT NULL CHECK (role IN ('main', 'worker')),
  comm          TEXT,
  first_seen_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, pid)
) STRICT;

CREATE VIEW job_dataloader AS
  SELECT strftime('%Y-%m-%d %H:%M:%f', s.ts_ms / 1000.0, 'unixepoch') AS time_utc,
         j.job_key, j.label, s.steps, s.samples,
         s.steps * 1000.0 / s.interval_ms AS steps_per_second,
         s.data_wait_seconds / NULLIF(s.data_wait_seconds + s.step_seconds, 0) AS data_wait_share,
         s.read_bytes_per_second, s.workers_cpu_ratio, s.d_state_threads, s.ts_ms
    FROM job_samples s JOIN jobs j USING (job_id);
