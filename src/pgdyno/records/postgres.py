"""What `pgdyno pg versions` and `pgdyno sandbox status` show, as frozen records.

postgres/binaries.py and postgres/cluster.py fill them; terminal/tables.py draws them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Available:
    """A PostgreSQL major that is installed (version and bin_dir set) or can be installed."""

    major: int
    version: str | None
    source: str
    bin_dir: Path | None


@dataclass(frozen=True)
class Status:
    """A sandbox cluster as found on disk and in the process table."""

    name: str
    version: str
    running: bool
    pid: int | None
    port: int
    socket_dir: Path
    data_dir: Path
    owner_pid: int | None
