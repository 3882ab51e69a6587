-- Cancel the statements that some sessions (by backend pid) run now.
SELECT pg_cancel_backend(pid) AS cancelled FROM unnest(%(pids)s::integer[]) AS pid
