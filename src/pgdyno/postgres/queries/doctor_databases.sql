-- The size of each database that allows connections. pg_database_size() raises an error
-- without CONNECT on the database or pg_read_all_stats, so it is only called where one of them
-- is held: the others come back with a NULL size.
SELECT datname,
       CASE WHEN has_database_privilege(oid, 'CONNECT')
                 OR pg_has_role('pg_read_all_stats', 'USAGE')
            THEN pg_database_size(oid)
       END AS bytes
FROM pg_database
WHERE datallowconn
ORDER BY datname
