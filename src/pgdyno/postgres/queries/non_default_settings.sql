-- Settings whose value does not come from the built-in default, with unit and source.
SELECT name, setting, unit, source
FROM pg_settings
WHERE source NOT IN ('default', 'override')
ORDER BY name
