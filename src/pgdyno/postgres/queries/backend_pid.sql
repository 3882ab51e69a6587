-- The process id of this session's backend.
SELECT pg_backend_pid() AS pid
