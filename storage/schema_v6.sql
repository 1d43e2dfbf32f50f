-- stallwatch database, schema version 6: ranks of synchronous multi-GPU jobs, and what the
-- GPUs really did (see schema_v1.sql for conventions).

-- GPU activity beside utilisation. Utilisation says a kernel ran; a GPU waiting inside a
-- collective for another rank runs one that spins, and reads near 100 %. GPM's SM activity
-- (Hopper and later) says how much of the GPU worked. NULL where the GPU has no GPM.
ALTER TABLE gpu_samples ADD COLUMN power_watts REAL;
ALTER TABLE gpu_samples ADD COLUMN sm_active_percent REAL;      -- NVML_GPM_METRIC_SM_UTIL
ALTER TABLE gpu_samples ADD COLUMN sm_occupancy_percent REAL;   -- NVML_GPM_METRIC_SM_OCCUPANCY
ALTER TABLE gpu_samples ADD COLUMN tensor_active_percent REAL;  -- NVML_GPM_METRIC_ANY_TENSOR_UTIL
ALTER TABLE gpu_samples ADD COLUMN dram_active_percent REAL;    -- NVML_GPM_METRIC_DRAM_BW_UTIL

-- The mean GPM work of the job's GPUs at each tick, beside gpu_util_percent: the busier of
-- tensor-core and DRAM activity, which a collective waiting for another rank leaves at 0.
ALTER TABLE job_samples ADD COLUMN gpu_work_percent REAL;

-- One row per rank of a job that runs two or more (one process per GPU, each with its own
-- dataloader workers). rank: RANK from the environment, else the index of its GPU.
CREATE TABLE job_ranks (
  job_id        INTEGER NOT NULL REFERENCES jobs (job_id),
  rank          INTEGER NOT NULL,
  pid           INTEGER NOT NULL,  -- the rank's main process (the latest, after a restart)
  gpu_uuid      TEXT,              -- the GPU it computes on
  first_seen_ms INTEGER NOT NULL,
  last_seen_ms  INTEGER NOT NULL,
  PRIMARY KEY (job_id, rank)
) STRICT;

-- Per rank per interval: job_samples' figures for that rank's processes, and its GPU's.
CREATE TABLE rank_samples (
  ts_ms                  INTEGER NOT NULL,
  job_id                 INTEGER NOT NULL REFERENCES jobs (job_id),
  rank                   INTEGER NOT NULL,
  interval_ms            INTEGER NOT NULL,
  processes              INTEGER NOT NULL,
  workers                INTEGER NOT NULL,
  read_bytes_per_second  REAL,
  write_bytes_per_second REAL,
  main_cpu_ratio         REAL,
  workers_cpu_ratio      REAL,
  d_state_threads        INTEGER NOT NULL,
  top_wchan              TEXT,
  steps                  INTEGER,
  data_wait_seconds      REAL,
  step_seconds           REAL,
  gpu_util_percent       REAL,
  gpu_work_percent     REAL
) STRICT;
CREATE INDEX rank_samples_by_job_time ON rank_samples (job_id, ts_ms, rank);

-- The rank that held a synchronous job back, where one did (NULL: a one-rank job, or every
-- rank starved alike); the ranks that waited for it, comma-separated.
ALTER TABLE incidents ADD COLUMN straggler_rank INTEGER;
ALTER TABLE incidents ADD COLUMN straggler_pid INTEGER;
ALTER TABLE incidents ADD COLUMN straggler_gpu TEXT;
ALTER TABLE incidents ADD COLUMN waiting_ranks TEXT;

DROP VIEW gpu_utilization;
CREATE VIEW gpu_utilization AS
  SELECT strftime('%Y-%m-%d %H:%M:%f', s.ts_ms / 1000.0, 'unixepoch') AS time_utc,
         g.gpu_index, g.uuid, s.utilization_percent, s.sm_active_percent, s.memory_utilization_percent,
         s.power_watts, s.memory_used_bytes, s.sm_clock_mhz, s.pcie_rx_bytes_per_second, s.pcie_tx_bytes_per_second, s.ts_ms
    FROM gpu_samples s JOIN gpus g USING (gpu_id);
