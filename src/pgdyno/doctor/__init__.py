"""pgdyno doctor: facts of the host and server, rules as data, findings."""
