-- stallwatch database, schema version 4: the live correlator's events (see schema_v1.sql for
-- conventions).

-- Every event of an incident the agent found live: it opened, changed class or device, or
-- closed. The incident itself is a row of incidents (source 'live') that the events update.
CREATE TABLE incident_events (
  ts_ms        INTEGER NOT NULL,  -- the interval whose samples produced the event
  incident_id  INTEGER NOT NULL REFERENCES incidents (incident_id),
  run_id       INTEGER REFERENCES runs (run_id),
  event        TEXT    NOT NULL CHECK (event IN ('open', 'change', 'close')),
  class        TEXT    NOT NULL,
  device       TEXT,
  notified     INTEGER NOT NULL   -- 1: handed to the hook/webhook; 0: none configured, or a flap
) STRICT;
CREATE INDEX incident_events_by_incident ON incident_events (incident_id, ts_ms);
