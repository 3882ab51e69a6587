-- The bench database's own tables, then their indexes, each group largest first: read in this
-- order by pg_prewarm, the indexes (and small tables) are what stays in shared buffers when the
-- data is larger than them, as under a random-access load.
SELECT c.oid, c.relname
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%'
  AND c.relkind IN ('r', 'i')
  AND c.relpersistence = 'p'
ORDER BY c.relkind = 'i', pg_relation_size(c.oid) DESC
