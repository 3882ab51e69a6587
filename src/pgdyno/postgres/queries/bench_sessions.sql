-- Client sessions still connected to one database (pgbench's, after it ended), not pgdyno's own.
SELECT count(*) AS sessions
FROM pg_stat_activity
WHERE datname = %(dbname)s
  AND backend_type = 'client backend'
  AND pid <> pg_backend_pid()
