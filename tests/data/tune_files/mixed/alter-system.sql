-- pgdyno-generated: pgdyno tune 0.1.0, 2026-05-01. Review before deploying.
-- PostgreSQL settings as ALTER SYSTEM statements (the same as postgresql.pgdyno.conf).
-- Advice of pgdyno for the profile oltp.
-- Install:
--   psql -v ON_ERROR_STOP=1 -f alter-system.sql  (as a superuser; writes postgresql.auto.conf)

SET standard_conforming_strings = on;

-- why shared_buffers (in effect now: 128MB)
ALTER SYSTEM SET shared_buffers = '4GB';  -- takes effect: restart

-- why huge_pages
ALTER SYSTEM SET huge_pages = 'on';  -- takes effect: restart

-- why work_mem
ALTER SYSTEM SET work_mem = '16MB';  -- takes effect: reload

-- why io_method
ALTER SYSTEM SET io_method = 'worker';  -- takes effect: restart

-- why io_method
-- measure first: ALTER SYSTEM SET io_method = 'io_uring';  -- takes effect: restart

-- why application_name
ALTER SYSTEM SET application_name = 'it''s';  -- takes effect: reload

-- why search_path
-- review first: ALTER SYSTEM SET search_path = 'a\b';  -- takes effect: reload

-- a long reason a long reason a long reason a long reason a long reason a long reason a long
-- reason a long reason a long reason a long reason a long reason a long reason with a line
-- break
ALTER SYSTEM SET checkpoint_timeout = '15min';  -- takes effect: reload

SELECT pg_reload_conf();
-- Restart PostgreSQL for these to take effect: shared_buffers, huge_pages, io_method.
