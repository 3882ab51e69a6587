-- Every setting the role may see, as pg_settings shows it. sourcefile and sourceline are NULL
-- for roles that are neither superuser nor members of pg_read_all_settings, and superuser-only
-- settings (data_directory, config_file, ...) are left out for them. min_val, max_val and
-- enumvals say what the server accepts (tune checks its values against them).
SELECT name, setting, unit, vartype, source, sourcefile, sourceline, pending_restart, context,
       boot_val, min_val, max_val, enumvals
FROM pg_settings
ORDER BY name
