-- One benchmark at a time on a server (postgres/server_lock.py): a session-level advisory lock,
-- held until this connection ends.
SELECT pg_try_advisory_lock(%(key)s) AS taken
