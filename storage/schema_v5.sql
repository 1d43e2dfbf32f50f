-- stallwatch database, schema version 5: drive health (see schema_v1.sql for conventions).

-- One reading of a drive's own health records and the verdict on it. `reading` keeps the
-- counters (ATA attributes, the NVMe log, SCSI error counters) as JSON so that the next
-- reading can be compared with it; `evidence` the counters that decided the verdict.
CREATE TABLE drive_health (
  ts_ms          INTEGER NOT NULL,
  run_id         INTEGER REFERENCES runs (run_id),
  device         TEXT    NOT NULL,
  kind           TEXT    NOT NULL CHECK (kind IN ('ata', 'nvme', 'scsi', 'unknown')),
  source         TEXT    NOT NULL,   -- libatasmart, nvme-log, smartctl-json, or '' (nothing read)
  verdict        TEXT    NOT NULL CHECK (verdict IN ('ok', 'warning', 'failing', 'worn-out', 'unknown', 'unsupported')),
  model          TEXT,
  serial         TEXT,
  passed         INTEGER,            -- the drive's own overall status, where it gives one
  temperature_c  REAL,
  power_on_hours INTEGER,
  reading        TEXT    NOT NULL,   -- JSON
  evidence       TEXT    NOT NULL,   -- JSON: [{counter, value, previous, rule, implies}]
  note           TEXT                -- why there is nothing to judge (no SMART, permission, a hung read)
) STRICT;
CREATE INDEX drive_health_by_device_time ON drive_health (device, ts_ms);
