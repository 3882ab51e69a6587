-- The settings in effect: every one the role may see, or those named (case-insensitively:
-- pg_settings spells DateStyle, TimeZone). The value as pg_settings shows it (in the setting's
-- unit) and as SHOW prints it, unit, type, source, context, whether a file value waits for a
-- restart, and the built-in default.
SELECT name, setting, current_setting(name) AS shown, unit, vartype, source, context,
       pending_restart, boot_val
FROM pg_settings
WHERE %(names)s::text[] IS NULL OR lower(name) = ANY(%(names)s::text[])
ORDER BY name
