-- pgdyno's dataset templates and the marker that says they are complete.
SELECT d.datname, shobj_description(d.oid, 'pg_database') AS marker,
       pg_database_size(d.oid) AS size_bytes
FROM pg_database d
WHERE d.datname LIKE 'pgdyno\_tpl\_%'
ORDER BY d.datname
