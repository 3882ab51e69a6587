-- Background writer counters, PostgreSQL 14 to 16 (the checkpointer's columns of this view are
-- read by pgstat_checkpointer_pre170000). buffers_backend: shared buffers written by backends.
SELECT buffers_clean,
       maxwritten_clean,
       buffers_alloc,
       buffers_backend,
       buffers_backend_fsync
FROM pg_stat_bgwriter
