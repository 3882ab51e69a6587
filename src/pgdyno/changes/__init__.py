"""The one owner of changing a PostgreSQL server: journalled ALTER SYSTEM, restarts, restore."""
