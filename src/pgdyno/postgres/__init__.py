"""PostgreSQL: binaries, the sandbox cluster, the client connection and settings."""
