-- Every line of the configuration files the server refused or could not apply, in file order
-- (a line without a setting name is named by its file).
SELECT coalesce(name, sourcefile) AS name, setting, error
FROM pg_file_settings
WHERE error IS NOT NULL
ORDER BY seqno
