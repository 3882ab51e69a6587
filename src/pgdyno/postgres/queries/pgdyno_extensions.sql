-- Extensions of the connected database that carry pgdyno's comment: the ones pgdyno created
-- (pg_prewarm for --prewarm, when it was missing), not ones that were there before.
SELECT e.extname, e.extversion
FROM pg_extension e
WHERE starts_with(coalesce(obj_description(e.oid, 'pg_extension'), ''), %(mark)s)
ORDER BY e.extname
