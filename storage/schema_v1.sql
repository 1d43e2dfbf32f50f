-- stallwatch database, schema version 1 (PRAGMA user_version).
-- Conventions: *_ms columns holding times are Unix epoch milliseconds (UTC, wall clock) of the
-- END of the interval a row describes; interval_ms is that interval's length measured on the
-- monotonic clock. Units are in the column names. NULL means "no value" (no I/O in the
-- interval, no reading), never zero. Tables are STRICT, so every column keeps its type.

CREATE TABLE runs (
  run_id          INTEGER PRIMARY KEY,
  started_ms      INTEGER NOT NULL,
  ended_ms        INTEGER,               -- NULL while recording, or after a crash
  hostname        TEXT    NOT NULL,
  version         TEXT    NOT NULL,
  interval_ms     INTEGER NOT NULL,
  collectors      TEXT    NOT NULL,      -- comma-separated names of the enabled collectors
  dropped_batches INTEGER NOT NULL DEFAULT 0  -- intervals lost because the writer fell behind
) STRICT;

-- Every block device seen in /proc/diskstats or sysfs, keyed by name and device number.
CREATE TABLE block_devices (
  device_id      INTEGER PRIMARY KEY,
  name           TEXT    NOT NULL,
  major          INTEGER NOT NULL,
  minor          INTEGER NOT NULL,
  kind           TEXT,        -- disk, partition, dm, md, loop; NULL if sysfs had no entry
  parent         TEXT,        -- partition: its whole disk
  slaves         TEXT,        -- dm/md: comma-separated devices underneath
  dm_name        TEXT,        -- dm: the mapper name
  backing_file   TEXT,        -- loop: the image file
  backing_device TEXT,        -- loop: the device whose filesystem holds the image
  physical       TEXT,        -- comma-separated physical devices at the bottom of the stack
  model          TEXT,
  serial         TEXT,
  wwn            TEXT,
  transport      TEXT,        -- ata, scsi, nvme, usb, virtio, ...
  rotational     INTEGER,     -- 1 spinning, 0 solid state
  size_bytes     INTEGER,
  first_seen_ms  INTEGER NOT NULL,
  last_seen_ms   INTEGER NOT NULL,
  UNIQUE (name, major, minor)
) STRICT;

CREATE TABLE mounts (
  device_id     INTEGER NOT NULL REFERENCES block_devices (device_id),
  mount_point   TEXT    NOT NULL,
  fs_type       TEXT    NOT NULL,
  source        TEXT    NOT NULL,
  first_seen_ms INTEGER NOT NULL,
  last_seen_ms  INTEGER NOT NULL,
  PRIMARY KEY (device_id, mount_point)
) STRICT;

-- One row per device per interval: iostat -x's figures (sysstat's definitions).
CREATE TABLE disk_samples (
  ts_ms                  INTEGER NOT NULL,
  device_id              INTEGER NOT NULL REFERENCES block_devices (device_id),
  interval_ms            INTEGER NOT NULL,
  reads_per_second       REAL    NOT NULL,
  writes_per_second      REAL    NOT NULL,
  read_bytes_per_second  REAL    NOT NULL,
  write_bytes_per_second REAL    NOT NULL,
  r_await_ms             REAL,   -- mean time per completed read; NULL without reads
  w_await_ms             REAL,
  discards_per_second    REAL,   -- kernels 4.18+
  d_await_ms             REAL,
  flushes_per_second     REAL,   -- kernels 5.5+
  f_await_ms             REAL,
  aqu_sz                 REAL    NOT NULL,  -- mean requests in the queue
  util_percent           REAL    NOT NULL,  -- busy time share; meaningless for NVMe/parallel devices
  in_flight              INTEGER NOT NULL   -- requests in flight at ts_ms
) STRICT;
CREATE INDEX disk_samples_by_device_time ON disk_samples (device_id, ts_ms);

-- Pressure stall information: share of the interval in which some / all tasks stalled.
CREATE TABLE pressure_samples (
  ts_ms       INTEGER NOT NULL,
  interval_ms INTEGER NOT NULL,
  resource    TEXT    NOT NULL CHECK (resource IN ('io', 'cpu', 'memory')),
  some_ratio  REAL,
  full_ratio  REAL
) STRICT;
CREATE INDEX pressure_samples_by_resource_time ON pressure_samples (resource, ts_ms);

CREATE TABLE gpus (
  gpu_id             INTEGER PRIMARY KEY,
  uuid               TEXT    NOT NULL UNIQUE,
  gpu_index          INTEGER NOT NULL,
  name               TEXT,
  memory_total_bytes INTEGER,
  first_seen_ms      INTEGER NOT NULL,
  last_seen_ms       INTEGER NOT NULL
) STRICT;

CREATE TABLE gpu_samples (
  ts_ms                      INTEGER NOT NULL,
  gpu_id                     INTEGER NOT NULL REFERENCES gpus (gpu_id),
  interval_ms                INTEGER NOT NULL,
  utilization_percent        REAL,     -- mean of the driver's samples in the interval
  utilization_sample_count   INTEGER NOT NULL,
  memory_utilization_percent REAL,
  memory_used_bytes          INTEGER,
  sm_clock_mhz               INTEGER,
  pcie_tx_bytes_per_second   INTEGER,
  pcie_rx_bytes_per_second   INTEGER
) STRICT;
CREATE INDEX gpu_samples_by_gpu_time ON gpu_samples (gpu_id, ts_ms);

CREATE TABLE gpu_process_samples (
  ts_ms                      INTEGER NOT NULL,
  gpu_id                     INTEGER NOT NULL REFERENCES gpus (gpu_id),
  pid                        INTEGER NOT NULL,
  sm_utilization_percent     REAL,
  memory_utilization_percent REAL
) STRICT;
CREATE INDEX gpu_process_samples_by_gpu_time ON gpu_process_samples (gpu_id, ts_ms);

-- What the agent itself went through: a collector failing or recovering, samples dropped.
CREATE TABLE agent_events (
  ts_ms   INTEGER NOT NULL,
  run_id  INTEGER REFERENCES runs (run_id),
  source  TEXT    NOT NULL,   -- collector name, "writer", "agent"
  level   TEXT    NOT NULL CHECK (level IN ('info', 'warning', 'error')),
  message TEXT    NOT NULL
) STRICT;

-- Views for asking by hand in the sqlite3 shell. Times shown in UTC.
CREATE VIEW disk_latency AS
  SELECT strftime('%Y-%m-%d %H:%M:%f', s.ts_ms / 1000.0, 'unixepoch') AS time_utc,
         d.name AS device, s.reads_per_second, s.r_await_ms, s.writes_per_second, s.w_await_ms,
         s.aqu_sz, s.util_percent, s.ts_ms, s.device_id
    FROM disk_samples s JOIN block_devices d USING (device_id);

CREATE VIEW disk_latest AS
  SELECT d.name AS device, d.kind, d.model,
         strftime('%Y-%m-%d %H:%M:%f', s.ts_ms / 1000.0, 'unixepoch') AS time_utc,
         s.reads_per_second, s.read_bytes_per_second, s.r_await_ms,
         s.writes_per_second, s.write_bytes_per_second, s.w_await_ms,
         s.aqu_sz, s.util_percent, s.in_flight
    FROM block_devices d
    JOIN disk_samples s ON s.device_id = d.device_id
   WHERE s.ts_ms = (SELECT max(ts_ms) FROM disk_samples WHERE device_id = d.device_id);

CREATE VIEW pressure AS
  SELECT strftime('%Y-%m-%d %H:%M:%f', ts_ms / 1000.0, 'unixepoch') AS time_utc,
         max(CASE resource WHEN 'io' THEN some_ratio END) AS io_some_ratio,
         max(CASE resource WHEN 'io' THEN full_ratio END) AS io_full_ratio,
         max(CASE resource WHEN 'cpu' THEN some_ratio END) AS cpu_some_ratio,
         max(CASE resource WHEN 'memory' THEN some_ratio END) AS memory_some_ratio,
         max(CASE resource WHEN 'memory' THEN full_ratio END) AS memory_full_ratio,
         ts_ms
    FROM pressure_samples GROUP BY ts_ms;

CREATE VIEW gpu_utilization AS
  SELECT strftime('%Y-%m-%d %H:%M:%f', s.ts_ms / 1000.0, 'unixepoch') AS time_utc,
         g.gpu_index, g.uuid, s.utilization_percent, s.memory_used_bytes, s.sm_clock_mhz,
         s.pcie_rx_bytes_per_second, s.pcie_tx_bytes_per_second, s.ts_ms
    FROM gpu_samples s JOIN gpus g USING (gpu_id);
