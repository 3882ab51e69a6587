-- Checkpointer counters, PostgreSQL 17+. Times are in milliseconds. num_timed also counts
-- checkpoints skipped because nothing was written since the last one.
SELECT num_timed,
       num_requested,
       write_time,
       sync_time,
       buffers_written,
       restartpoints_timed,
       restartpoints_req,
       restartpoints_done
FROM pg_stat_checkpointer
