-- Whether the postmaster has read its configuration files again since a moment of its clock.
SELECT pg_conf_load_time() >= %(since)s AS loaded
