-- stallwatch database, schema version 14: cpu_samples.iowait_cores may be NULL.
--
-- Where the host's busy time comes from the root cgroup's cpu.stat (a fifth of /proc/stat's
-- cost on a many-core host, and /proc/stat's grows with the CPUs and interrupts: issue 47), the
-- I/O wait is not measured at each interval: NULL there, not a zero that says none. Only the
-- column's constraint is dropped (every row meets the new one): SQLite's documented way for such
-- a change is to edit the schema's text in place, as version 13 did.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'iowait_cores REAL    NOT NULL', 'iowait_cores REAL')
 WHERE type = 'table' AND name = 'cpu_samples';
PRAGMA writable_schema = RESET;
