-- stallwatch database, schema version 12: every I/O's latency (see schema_v1.sql for
-- conventions).

-- Per interval, device and operation (read, write, flush, discard, other), and whose I/O it was
-- (a followed job's, job_id; everyone else's, NULL): the I/Os completed, their mean latency
-- from allocation (or issue) to completion and their mean service time from issue, the 50th,
-- 99th and 99.9th percentiles of their latency (not of interval averages), and the histogram
-- itself: "slot:count" pairs, slots 0..7 holding 0..7 us, then 8 linear steps per power of
-- two (collectors/io_latency_histogram.h). From the eBPF collector (--collector.io_latency).
CREATE TABLE io_latency_samples (
  ts_ms           INTEGER NOT NULL,
  device_id       INTEGER NOT NULL REFERENCES block_devices (device_id),
  interval_ms     INTEGER NOT NULL,
  op              TEXT    NOT NULL,
  job_id          INTEGER REFERENCES jobs (job_id),
  count           INTEGER NOT NULL,
  mean_ms         REAL    NOT NULL,
  service_mean_ms REAL    NOT NULL,
  p50_ms          REAL,
  p99_ms          REAL,
  p999_ms         REAL,
  slots           TEXT    NOT NULL
) STRICT;
CREATE INDEX io_latency_samples_by_time ON io_latency_samples (ts_ms);
