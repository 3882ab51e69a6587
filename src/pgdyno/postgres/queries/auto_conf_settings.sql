-- The settings in postgresql.auto.conf (what ALTER SYSTEM wrote), in file order. The view needs
-- a superuser (or EXECUTE on pg_show_all_file_settings); pg_read_all_settings is not enough.
SELECT name, setting, applied, error
FROM pg_file_settings
WHERE right(sourcefile, 21) = '/postgresql.auto.conf'
ORDER BY seqno
