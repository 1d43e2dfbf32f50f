-- stallwatch database, schema version 13: the same tables; the CHECKs of the rows written every
-- interval as equalities joined by OR.
--
-- SQLite evaluates a CHECK's "x IN ('a', 'b', 'c')" by building a temporary b-tree of the list
-- for each row inserted: three pressure rows an interval cost the writer more than all its other
-- rows together (issue 47: 139 000 of 237 000 instructions an interval). The same test as ORs is
-- a few comparisons. Only the constraint's text changes (no row is rewritten, no row can fail
-- it): SQLite's documented way for such a change is to edit the schema's text in place.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (resource IN (''io'', ''cpu'', ''memory''))',
                     'CHECK (resource = ''io'' OR resource = ''cpu'' OR resource = ''memory'')')
 WHERE type = 'table' AND name = 'pressure_samples';
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (role IN (''main'', ''worker''))',
                     'CHECK (role = ''main'' OR role = ''worker'')')
 WHERE type = 'table' AND name = 'job_processes';
-- Reparsed now, by this connection; the other connections' copies hold the same test.
PRAGMA writable_schema = RESET;
