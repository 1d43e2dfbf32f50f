-- stallwatch database, schema version 7: mounts that no block device serves (NFS, FUSE,
-- overlay) as storage targets (see schema_v1.sql for conventions).

-- A target is a block_devices row named by its mount point (block device names never start
-- with '/'), kind 'nfs', 'fuse' or 'overlay', with its anonymous device number (0:N); its
-- per-interval figures are disk_samples rows like any device's: for NFS, r/w await = READ/WRITE
-- execute time per op and aqu_sz = RPCs outstanding; for FUSE, aqu_sz = requests waiting for
-- the daemon. served_by says what serves it: the NFS server and export, the FUSE daemon, the
-- devices under an overlay's layers.
ALTER TABLE block_devices ADD COLUMN served_by TEXT;

-- What an NFS mount adds per interval (nfsiostat's arithmetic). The kernel keeps these per
-- RPC client, which mounts of one server with the same options share: such mounts show the
-- same figures.
CREATE TABLE nfs_samples (
  ts_ms                      INTEGER NOT NULL,
  device_id                  INTEGER NOT NULL REFERENCES block_devices (device_id),
  read_rtt_ms                REAL,     -- Δ rtt / Δ ops of READ; NULL without reads
  write_rtt_ms               REAL,
  metadata_ops_per_second    REAL    NOT NULL,  -- all ops but READ, WRITE, COMMIT, NULL
  metadata_await_ms          REAL,              -- their mean execute time
  retransmissions_per_second REAL    NOT NULL,
  timeouts_per_second        REAL    NOT NULL
) STRICT;
CREATE INDEX nfs_samples_by_device_time ON nfs_samples (device_id, ts_ms);
