-- data_directory through pg_settings: a role without pg_read_all_settings gets NULL there
-- instead of an error from current_setting().
SELECT current_setting('server_version_num')::int AS version_num,
       current_setting('server_version') AS version,
       (SELECT setting FROM pg_settings WHERE name = 'data_directory') AS data_directory,
       pg_size_bytes(current_setting('shared_buffers'))::bigint AS shared_buffers_bytes,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS is_superuser,
       (SELECT rolcreatedb FROM pg_roles WHERE rolname = current_user) AS can_create_db
