"""The host: facts read from /proc and /sys (pure parsers plus thin readers)."""
