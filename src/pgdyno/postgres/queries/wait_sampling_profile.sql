-- pg_wait_sampling's cumulative profile (https://github.com/postgrespro/pg_wait_sampling),
-- counted as wait_sample.sql counts one look: by process kind and event, for the benchmark
-- database's client backends and the background processes, without idle waits. Each count is
-- one sample of pg_wait_sampling.profile_period milliseconds. Read only when the profile is
-- kept per process (pg_wait_sampling.profile_pid, on by default: else pid is 0 and joins
-- nothing) and sessions on CPU are sampled (sample_cpu: NULL event_type, CPU* here); see
-- wait_sampling_check.sql. A process that has ended is no longer in pg_stat_activity and drops
-- out. Columns as in pg_wait_sampling 1.1: pid, event_type, event, queryid, count.
SELECT CASE WHEN a.backend_type = 'client backend' THEN '' ELSE a.backend_type END AS process,
       CASE WHEN p.event_type IS NULL THEN 'CPU*'
            ELSE p.event_type || ':' || coalesce(p.event, '?') END AS event,
       sum(p.count)::bigint AS count
FROM pg_wait_sampling_profile AS p
JOIN pg_stat_activity AS a ON a.pid = p.pid
WHERE a.pid <> pg_backend_pid()
  AND (a.backend_type <> 'client backend' OR a.datname = %(dbname)s)
  AND p.event_type IS DISTINCT FROM 'Activity'
  AND NOT (p.event_type IS NOT DISTINCT FROM 'Client'
           AND p.event IS NOT DISTINCT FROM 'ClientRead')
GROUP BY 1, 2
