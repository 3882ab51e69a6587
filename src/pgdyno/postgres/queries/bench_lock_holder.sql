-- Who holds the benchmark lock (postgres/server_lock.py), for the message of the one refused:
-- a bigint key is split into classid (high 32 bits) and objid (low 32 bits), objsubid 1.
SELECT l.pid, host(a.client_addr) AS address,
       to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') AS started
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid::bigint = (%(key)s::bigint >> 32)
  AND l.objid::bigint = (%(key)s::bigint & 4294967295)
LIMIT 1
