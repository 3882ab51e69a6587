-- Client backends now, the audit's own session included. Without superuser or
-- pg_read_all_stats, other roles' sessions show no backend_type and no state: they are counted
-- in "hidden", and the counts above them are then incomplete.
SELECT count(*) FILTER (WHERE backend_type = 'client backend') AS total,
       count(*) FILTER (WHERE backend_type = 'client backend' AND state = 'active') AS active,
       count(*) FILTER (WHERE backend_type = 'client backend'
                          AND state IN ('idle in transaction', 'idle in transaction (aborted)'))
           AS idle_in_transaction,
       count(*) FILTER (WHERE backend_type IS NULL) AS hidden
FROM pg_stat_activity
