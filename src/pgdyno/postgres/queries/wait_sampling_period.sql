-- Whether pg_wait_sampling is installed in this database and loaded, and its sample period
-- in milliseconds (NULL when it is not usable here).
SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_wait_sampling')
            THEN current_setting('pg_wait_sampling.profile_period', true) END
