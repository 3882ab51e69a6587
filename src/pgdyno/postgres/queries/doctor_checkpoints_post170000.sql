-- Checkpoints since the statistics were reset, PostgreSQL 17+ (pg_stat_checkpointer).
-- num_timed also counts checkpoints skipped because nothing was written since the last one.
SELECT num_timed AS timed, num_requested AS requested, stats_reset
FROM pg_stat_checkpointer
