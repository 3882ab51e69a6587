-- pgdyno-generated: pgdyno tune 0.1.0, 2026-05-01. Review before deploying.
-- PostgreSQL settings as ALTER SYSTEM statements (the same as postgresql.pgdyno.conf).
-- Advice of pgtune for the profile web.
-- Install:
--   psql -v ON_ERROR_STOP=1 -f alter-system.sql  (as a superuser; writes postgresql.auto.conf)

SET standard_conforming_strings = on;

-- why work_mem
ALTER SYSTEM SET work_mem = '16MB';  -- takes effect: reload

-- why jit
ALTER SYSTEM SET jit = 'off';  -- takes effect: reload

SELECT pg_reload_conf();
