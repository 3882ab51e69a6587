-- Whether an extension is already installed in the connected database.
SELECT true AS found FROM pg_extension WHERE extname = %(name)s
