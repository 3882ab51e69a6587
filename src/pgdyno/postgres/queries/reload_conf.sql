-- Ask the postmaster to read its configuration files again (it signals; the read comes later).
SELECT pg_reload_conf() AS asked
