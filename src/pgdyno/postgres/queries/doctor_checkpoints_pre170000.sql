-- Checkpoints since the statistics were reset, PostgreSQL 14 to 16 (pg_stat_bgwriter).
SELECT checkpoints_timed AS timed, checkpoints_req AS requested, stats_reset
FROM pg_stat_bgwriter
