-- Commits plus rollbacks of one database (TPC-C-like TPM); no row while it does not exist.
SELECT xact_commit + xact_rollback AS xacts
FROM pg_stat_database
WHERE datname = %(dbname)s
