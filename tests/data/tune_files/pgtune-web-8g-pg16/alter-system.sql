-- pgdyno-generated: pgdyno tune 0.1.0, 2026-05-01. Review before deploying.
-- PostgreSQL settings as ALTER SYSTEM statements (the same as postgresql.pgdyno.conf).
-- Advice of pgtune for the profile web.
-- Install:
--   psql -v ON_ERROR_STOP=1 -f alter-system.sql  (as a superuser; writes postgresql.auto.conf)

SET standard_conforming_strings = on;

-- pgtune's formula
ALTER SYSTEM SET max_connections = '200';  -- takes effect: restart

-- pgtune's formula
ALTER SYSTEM SET shared_buffers = '2GB';  -- takes effect: restart

-- pgtune's formula
ALTER SYSTEM SET effective_cache_size = '6GB';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET maintenance_work_mem = '512MB';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET checkpoint_completion_target = '0.9';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET wal_buffers = '16MB';  -- takes effect: restart

-- pgtune's formula
ALTER SYSTEM SET default_statistics_target = '100';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET random_page_cost = '1.1';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET effective_io_concurrency = '200';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET work_mem = '10082kB';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET huge_pages = 'try';  -- takes effect: restart

-- pgtune's formula
ALTER SYSTEM SET jit = 'off';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET wal_compression = 'lz4';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET min_wal_size = '1GB';  -- takes effect: reload

-- pgtune's formula
ALTER SYSTEM SET max_wal_size = '4GB';  -- takes effect: reload

SELECT pg_reload_conf();
-- Restart PostgreSQL for these to take effect: max_connections, shared_buffers, wal_buffers,
-- huge_pages.
