-- What collect/waits.py needs to know before it reads pg_wait_sampling's profile instead of
-- pg_stat_activity: whether the extension is created in this database (its view lives only
-- where CREATE EXTENSION ran), and its settings, which exist only when the library is loaded
-- (shared_preload_libraries): the sample period in milliseconds, whether the profile is kept
-- per process (profile_pid), and whether sessions on CPU are sampled (sample_cpu; NULL from a
-- version that has no such setting and never samples them).
SELECT current_database() AS dbname,
       EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_wait_sampling') AS created,
       current_setting('pg_wait_sampling.profile_period', true) AS period_ms,
       current_setting('pg_wait_sampling.profile_pid', true) AS profile_pid,
       current_setting('pg_wait_sampling.sample_cpu', true) AS sample_cpu
