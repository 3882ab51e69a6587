"""Which process owns a running session or comparison, and closing those whose owner is gone.

A pgdyno killed by SIGKILL cannot mark its rows; the next command that opens the results
database does, for rows of this host whose owner process no longer exists (a reused pid is told
apart by the process's start time).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from pgdyno.process import same_process, start_time
from pgdyno.results.database import Database

TABLES = ("sessions", "comparisons")


@dataclass(frozen=True)
class Owner:
    hostname: str
    pid: int
    started: int | None  # clock ticks since boot; None when /proc cannot tell

    @classmethod
    def me(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, start_time(pid))


def abandoned(db: Database, table: str, hostname: str) -> list[int]:
    """Ids of `table`'s running rows of this host whose owner process is gone (a shared
    database holds other hosts' rows too: only this host's processes can be checked)."""
    rows = db.query(
        f"SELECT id, pid, owner_started FROM {table}"  # table: one of TABLES
        " WHERE status = 'running' AND hostname = ? AND pid IS NOT NULL",
        (hostname,),
    )
    return [int(r["id"]) for r in rows if not same_process(int(r["pid"]), r["owner_started"])]


def any_abandoned(db: Database) -> bool:
    hostname = socket.gethostname()
    return any(abandoned(db, table, hostname) for table in TABLES)


def mark_interrupted(db: Database, found_at: str) -> int:
    """Mark abandoned sessions and comparisons 'interrupted', noting when; how many were."""
    hostname = socket.gethostname()
    marked = 0
    for table in TABLES:
        for row_id in abandoned(db, table, hostname):
            marked += db.execute(
                f"UPDATE {table} SET status = 'interrupted', found_interrupted_at = ?"
                " WHERE id = ? AND status = 'running'",
                (found_at, row_id),
            )
    return marked
