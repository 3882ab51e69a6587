-- The settings in effect, by name (case-insensitively: pg_settings spells DateStyle, TimeZone):
-- the value as pg_settings shows it (in the setting's unit) and as SHOW prints it, unit, type,
-- source, context, whether a file value waits for a restart, and the built-in default.
SELECT name, setting, current_setting(name) AS shown, unit, vartype, source, context,
       pending_restart, boot_val
FROM pg_settings
WHERE lower(name) = ANY(%(names)s)
ORDER BY name
