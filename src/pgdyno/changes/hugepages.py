"""Huge pages for a server: how many its shared memory needs, and how many the kernel has free.

PostgreSQL 15+ reports what its shared memory needs (shared_memory_size_in_huge_pages) once
it runs; a restart that changes shared_buffers changes that, so the need at the next start is
estimated from the running figure and the change. Pages the running server holds come free
when it stops, so they count as available for its restart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgdyno.host.machine import parse_meminfo
from pgdyno.postgres.client import Client


def needed_huge_pages(client: Client) -> int | None:
    """shared_memory_size_in_huge_pages of the running server; None before PostgreSQL 15 or
    where huge pages are not supported (-1)."""
    rows = client.rows(
        "SELECT setting FROM pg_settings WHERE name = 'shared_memory_size_in_huge_pages'"
    )
    if not rows or rows[0][0] in (None, "-1"):
        return None
    return int(rows[0][0])


def _status(client: Client) -> str | None:
    rows = client.rows("SELECT setting FROM pg_settings WHERE name = 'huge_pages_status'")
    return str(rows[0][0]) if rows else None


def start_facts(
    client: Client, proc_root: Path, now: Mapping[str, Any], then: Mapping[str, Any]
) -> dict[str, int]:
    """`host.huge_pages_needed` and `host.huge_pages_available` for the start constraints, for a
    server on this host whose settings go from `now` to `then` (base units); {} when unknown."""
    try:
        meminfo = parse_meminfo((proc_root / "meminfo").read_text())
    except OSError:
        return {}
    page = meminfo.get("Hugepagesize")
    running = needed_huge_pages(client)
    if not page or running is None:
        return {}
    grown = sum(
        int(then.get(name) or 0) - int(now.get(name) or 0)
        for name in ("shared_buffers", "wal_buffers")
        if isinstance(then.get(name), int) and isinstance(now.get(name), int)
    )
    needed = max(0, running + math.ceil(grown / page))
    held = running if _status(client) == "on" else 0
    return {
        "huge_pages_needed": needed,
        "huge_pages_available": int(meminfo.get("HugePages_Free", 0)) + held,
    }
