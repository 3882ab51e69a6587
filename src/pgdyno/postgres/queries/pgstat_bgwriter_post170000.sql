-- Background writer counters, PostgreSQL 17+ (17 moved the checkpoint columns to
-- pg_stat_checkpointer and dropped buffers_backend: see pg_stat_io for backend writes).
SELECT buffers_clean,
       maxwritten_clean,
       buffers_alloc
FROM pg_stat_bgwriter
