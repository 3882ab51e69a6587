-- The databases pgdyno creates: its dataset templates (pgdyno_tpl_s<scale>, pgdyno_tpl_tpcc_w<N>)
-- and the bench copy,
-- with their comment (pgdyno's marker) and size. pg_database_size() raises an error without
-- CONNECT on the database or pg_read_all_stats: those come back with a NULL size.
SELECT d.datname, shobj_description(d.oid, 'pg_database') AS note,
       CASE WHEN has_database_privilege(d.oid, 'CONNECT')
                 OR pg_has_role('pg_read_all_stats', 'USAGE')
            THEN pg_database_size(d.oid)
       END AS bytes
FROM pg_database d
WHERE d.datname ~ '^pgdyno_tpl_(s|tpcc_w)[0-9]+$' OR d.datname = %(bench)s
ORDER BY d.datname
