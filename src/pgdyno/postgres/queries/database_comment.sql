-- The comment on one database: pgdyno's marker of whether the bench database is pristine.
SELECT shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE datname = %(db)s
