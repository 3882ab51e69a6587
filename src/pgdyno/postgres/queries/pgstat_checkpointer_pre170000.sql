-- Checkpointer counters, PostgreSQL 14 to 16: still part of pg_stat_bgwriter. Named as in
-- pg_stat_checkpointer (17+). Times are in milliseconds.
SELECT checkpoints_timed AS num_timed,
       checkpoints_req AS num_requested,
       checkpoint_write_time AS write_time,
       checkpoint_sync_time AS sync_time,
       buffers_checkpoint AS buffers_written
FROM pg_stat_bgwriter
