-- The benchmark lock let go before its connection closes (postgres/server_lock.py): a backend
-- ends after its client has gone, so until then the next command would find it still held.
SELECT pg_advisory_unlock(%(key)s) AS released
