-- The state of some settings: value as shown, unit, type, source, context, waiting for a restart.
SELECT name, setting, unit, vartype, source, context, pending_restart, boot_val
FROM pg_settings
WHERE name = ANY(%(names)s)
