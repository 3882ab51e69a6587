-- WAL counters, PostgreSQL 14 to 17. Times are in milliseconds (0 unless track_wal_io_timing).
SELECT wal_records,
       wal_fpi,
       wal_bytes,
       wal_buffers_full,
       wal_write,
       wal_sync,
       wal_write_time,
       wal_sync_time
FROM pg_stat_wal
