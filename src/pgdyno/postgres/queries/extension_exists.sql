-- Whether an extension is already installed in the connected database.
SELECT 1 FROM pg_extension WHERE extname = %(name)s
