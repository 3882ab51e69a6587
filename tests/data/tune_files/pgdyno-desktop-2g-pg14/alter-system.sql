-- pgdyno-generated: pgdyno tune 0.1.0, 2026-05-01. Review before deploying.
-- PostgreSQL settings as ALTER SYSTEM statements (the same as postgresql.pgdyno.conf).
-- Advice of pgdyno for the profile desktop.
-- Install:
--   psql -v ON_ERROR_STOP=1 -f alter-system.sql  (as a superuser; writes postgresql.auto.conf)

SET standard_conforming_strings = on;

-- the connections the server must accept (--connections, else what the server allows now, else
-- the profile's usual number); every memory budget below counts them
ALTER SYSTEM SET max_connections = '20';  -- takes effect: restart

-- a quarter of the memory PostgreSQL may use (a sixteenth on a desktop), raised up to 2/5 when
-- that holds the whole database: hits in shared buffers avoid copying from the page cache (in
-- effect now: 128MB)
ALTER SYSTEM SET shared_buffers = '128MB';  -- takes effect: restart

-- the planner's estimate of the cache (shared buffers plus page cache): three quarters of the
-- memory
ALTER SYSTEM SET effective_cache_size = '512MB';  -- takes effect: reload

-- VACUUM and CREATE INDEX memory: a sixteenth of RAM (an eighth for analytics), capped because
-- autovacuum workers use it each
ALTER SYSTEM SET maintenance_work_mem = '128MB';  -- takes effect: reload

-- one autovacuum worker per four CPUs, at least PostgreSQL's 3: each counts
-- maintenance_work_mem in the worst case below
ALTER SYSTEM SET autovacuum_max_workers = '3';  -- takes effect: restart

-- the largest value for which every connection and parallel worker sorting at once (times
-- hash_mem_multiplier), with autovacuum at maintenance_work_mem, stays within 3/4 of the
-- memory; capped by profile; never below PostgreSQL's 64kB minimum
ALTER SYSTEM SET work_mem = '32MB';  -- takes effect: reload

-- WAL segments kept for reuse instead of being created again after each checkpoint
ALTER SYSTEM SET min_wal_size = '100MB';  -- takes effect: reload

-- checkpoints driven by time, not by WAL volume: fewer checkpoints, fewer full-page images;
-- kept within a quarter of the WAL file system's free space
ALTER SYSTEM SET max_wal_size = '2GB';  -- takes effect: reload

-- spread each checkpoint's writes over 90% of the interval
ALTER SYSTEM SET checkpoint_completion_target = '0.9';  -- takes effect: reload

-- automatic: 1/32 of shared_buffers, 16MB at these sizes
ALTER SYSTEM SET wal_buffers = '-1';  -- takes effect: restart

-- random reads cost nearly what sequential ones do on flash (and when the data sits in memory);
-- 4 only for spinning disks
ALTER SYSTEM SET random_page_cost = '1.1';  -- takes effect: reload

-- read-ahead requests in flight for bitmap scans: flash and arrays serve many at once
ALTER SYSTEM SET effective_io_concurrency = '200';  -- takes effect: reload

-- the same for VACUUM and other maintenance
ALTER SYSTEM SET maintenance_io_concurrency = '200';  -- takes effect: reload

SELECT pg_reload_conf();
-- Restart PostgreSQL for these to take effect: max_connections, autovacuum_max_workers,
-- wal_buffers.
