-- A setting's value as SHOW prints it; NULL for a custom setting (pgdyno.changed_by) never set.
SELECT current_setting(%(name)s, true) AS value
