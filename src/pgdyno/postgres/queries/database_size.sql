SELECT pg_database_size(%(dbname)s)
