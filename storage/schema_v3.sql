-- stallwatch database, schema version 3: incidents (see schema_v1.sql for conventions).

-- A stall of a job and its verdict. Recomputable from the samples (stallwatch incidents
-- --recompute); source says which pass wrote it.
CREATE TABLE incidents (
  incident_id      INTEGER PRIMARY KEY,
  job_id           INTEGER NOT NULL REFERENCES jobs (job_id),
  start_ms         INTEGER NOT NULL,
  end_ms           INTEGER NOT NULL,
  class            TEXT    NOT NULL CHECK (class IN ('disk-slow', 'io-throttled', 'input-cpu',
                                                     'checkpoint', 'not-storage')),
  device           TEXT,   -- disk-slow: the device the job reads that got slow
  physical_device  TEXT,   -- the device underneath it, where they differ
  idle_share       REAL    NOT NULL,  -- share of the job's GPU capacity lost in the window
  gpu_seconds_lost REAL    NOT NULL,
  confidence       REAL    NOT NULL,  -- 0..1
  evidence         TEXT    NOT NULL,  -- JSON: [{signal, baseline, during, supports}]
  source           TEXT    NOT NULL CHECK (source IN ('live', 'recompute')),
  detected_ms      INTEGER NOT NULL
) STRICT;
CREATE INDEX incidents_by_job_time ON incidents (job_id, start_ms);

-- The mean utilisation of the job's GPUs at each tick, written by the recorder: the job's
-- progress signal, read by the report without scanning every GPU's samples.
ALTER TABLE job_samples ADD COLUMN gpu_util_percent REAL;

-- Covering indexes for reading a job's week back (stallwatch report): the per-device,
-- per-GPU and per-resource scans read the values from the index itself instead of looking
-- up every row in the table (22 % of a report's time before; docs/MEASUREMENTS.md).
DROP INDEX disk_samples_by_device_time;
CREATE INDEX disk_samples_by_device_time ON disk_samples (device_id, ts_ms, r_await_ms, w_await_ms, aqu_sz);
DROP INDEX gpu_samples_by_gpu_time;
CREATE INDEX gpu_samples_by_gpu_time ON gpu_samples (gpu_id, ts_ms, utilization_percent);
DROP INDEX pressure_samples_by_resource_time;
CREATE INDEX pressure_samples_by_resource_time ON pressure_samples (resource, ts_ms, some_ratio);
