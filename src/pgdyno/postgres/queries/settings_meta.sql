-- What each setting accepts on this server: type, unit, range (in that unit), enum values, and
-- when a change takes effect (context). min_val and max_val are text, as pg_settings has them.
SELECT name, vartype, unit, min_val, max_val, enumvals, context, setting
FROM pg_settings
ORDER BY name
