"""Reading what `pgdyno tune --out` wrote, as a test checks it."""

from __future__ import annotations


def conf_values(text: str) -> dict[str, str]:
    """name -> value of the uncommented `name = value` lines of a postgresql.conf file."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {
        name.strip(): value.split("#")[0].strip().strip("'")
        for name, value in pairs
        if not name.lstrip().startswith("#")
    }
