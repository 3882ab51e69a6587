-- Buffer cache, temporary file and deadlock counters summed over every database (and the row of
-- shared objects), since each database's statistics were last reset.
SELECT coalesce(sum(blks_hit), 0)::bigint AS blks_hit,
       coalesce(sum(blks_read), 0)::bigint AS blks_read,
       coalesce(sum(temp_files), 0)::bigint AS temp_files,
       coalesce(sum(temp_bytes), 0)::bigint AS temp_bytes,
       coalesce(sum(deadlocks), 0)::bigint AS deadlocks
FROM pg_stat_database
