"""Plan files: configuration sets to compare, read from TOML and validated before anything runs."""
