"""pgdyno: a performance lab for PostgreSQL on Linux."""

__version__ = "0.1.0"
