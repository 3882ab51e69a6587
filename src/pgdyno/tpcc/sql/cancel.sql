-- Cancel the statements of the loader's other sessions (after a failure or an interrupt).
SELECT pg_cancel_backend(pid) FROM unnest(%(pids)s::integer[]) AS pid
