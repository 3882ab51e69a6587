"""Huge pages for a server: how many its shared memory needs, and how many the kernel has free.

PostgreSQL 15+ reports what its shared memory needs (shared_memory_size_in_huge_pages) once
it runs; a restart that changes shared_buffers changes that, so the need at the next start is
estimated from the running figure and the change. Pages the running server holds come free
when it stops, so they count as available for its restart. Pages other processes hold (another
cluster, a JVM) are theirs: free means HugePages_Free less HugePages_Rsvd (pages mapped but not yet
touched are counted free by the kernel though promised), and a reservation for this server is
what it needs on top of what the others hold (https://www.kernel.org/doc/html/latest/admin-guide/mm/hugetlbpage.html).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgdyno.host.machine import parse_meminfo
from pgdyno.postgres.client import Client
from pgdyno.postgres.server import effective_settings


def needed_huge_pages(client: Client) -> int | None:
    """shared_memory_size_in_huge_pages of the running server; None before PostgreSQL 15 or
    where huge pages are not supported (-1)."""
    value = _setting(client, "shared_memory_size_in_huge_pages")
    if value in (None, "-1"):
        return None
    return int(value)


def _setting(client: Client, name: str) -> str | None:
    """The setting as pg_settings shows it; None where the server has no such setting."""
    found = effective_settings(client, [name]).get(name)
    return None if found is None else found.setting


def _status(client: Client) -> str | None:
    return _setting(client, "huge_pages_status")


def held_by(client: Client) -> int:
    """Huge pages the running server holds: its shared memory's count when it runs on them."""
    if _status(client) != "on":
        return 0
    return needed_huge_pages(client) or 0


def pool(meminfo: Mapping[str, int]) -> tuple[int, int]:
    """(free, in use) huge pages of the kernel's pool: free excludes pages promised to a mapping
    (HugePages_Rsvd), in use counts them.

    >>> pool({"HugePages_Total": 100, "HugePages_Free": 40, "HugePages_Rsvd": 10})
    (30, 70)
    """
    total = int(meminfo.get("HugePages_Total", 0))
    free = max(0, int(meminfo.get("HugePages_Free", 0)) - int(meminfo.get("HugePages_Rsvd", 0)))
    return free, max(0, total - free)


def held_elsewhere(client: Client, proc_root: Path) -> int:
    """Huge pages held by processes other than this server (0 when unknown): a reservation for
    the server must leave them their pages."""
    try:
        meminfo = parse_meminfo((proc_root / "meminfo").read_text())
    except OSError:
        return 0
    return max(0, pool(meminfo)[1] - held_by(client))


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
    return {
        "huge_pages_needed": needed,
        "huge_pages_available": pool(meminfo)[0] + held_by(client),
    }
