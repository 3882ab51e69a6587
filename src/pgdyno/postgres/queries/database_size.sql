SELECT pg_database_size(%(dbname)s) AS size_bytes
