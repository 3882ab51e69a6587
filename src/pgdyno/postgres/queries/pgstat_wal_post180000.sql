-- WAL counters, PostgreSQL 18+ (18 moved wal_write, wal_sync and their times to pg_stat_io,
-- object 'wal': see pgstat_io_post180000).
SELECT wal_records,
       wal_fpi,
       wal_bytes,
       wal_buffers_full
FROM pg_stat_wal
