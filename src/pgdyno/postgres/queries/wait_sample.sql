-- One look at what the server's sessions are doing (collect/waits.py), counted by process kind
-- and wait event: the benchmark database's active client backends, and every background
-- process that is not idle. Left out: this session, idle sessions, waits for the client
-- (Client:ClientRead), background processes resting in their main loop (type Activity) and
-- pg_wait_sampling's collector, which sleeps between its samples (Extension:Extension) when the
-- library is loaded but its extension is not created in this database.
-- A session with no wait event is on CPU, or in code PostgreSQL does not instrument: CPU*.
SELECT CASE WHEN backend_type = 'client backend' THEN '' ELSE backend_type END AS process,
       CASE WHEN wait_event_type IS NULL THEN 'CPU*'
            ELSE wait_event_type || ':' || coalesce(wait_event, '?') END AS event,
       count(*)::int AS count
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND CASE WHEN backend_type = 'client backend'
           THEN datname = %(dbname)s AND state = 'active'
           ELSE state IS DISTINCT FROM 'idle' END
  AND wait_event_type IS DISTINCT FROM 'Activity'
  AND backend_type IS DISTINCT FROM 'pg_wait_sampling collector'
  AND NOT (wait_event_type IS NOT DISTINCT FROM 'Client'
           AND wait_event IS NOT DISTINCT FROM 'ClientRead')
GROUP BY 1, 2
