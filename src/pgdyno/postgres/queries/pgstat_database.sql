-- Counters of one database (no row when it does not exist, for example while it is re-created).
SELECT xact_commit,
       xact_rollback,
       blks_read,
       blks_hit,
       temp_files,
       temp_bytes,
       deadlocks
FROM pg_stat_database
WHERE datname = %(dbname)s
