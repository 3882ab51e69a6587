"""Which process owns a running session or comparison, and closing those whose owner is gone.

A pgdyno killed by SIGKILL cannot mark its rows; the next command that opens the results
database does, for rows of this host whose owner process no longer exists (a reused pid is told
apart by the process's start time).
"""

from __future__ import annotations

import os
import socket
import sqlite3
from dataclasses import dataclass

from pgdyno.process import same_process, start_time

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


def abandoned(conn: sqlite3.Connection, table: str, hostname: str) -> list[int]:
    """Ids of `table`'s running rows of this host whose owner process is gone."""
    rows = conn.execute(
        f"SELECT id, pid, owner_started FROM {table}"  # table: one of TABLES
        " WHERE status = 'running' AND hostname = ? AND pid IS NOT NULL",
        (hostname,),
    ).fetchall()
    return [int(row[0]) for row in rows if not same_process(int(row[1]), row[2])]


def any_abandoned(conn: sqlite3.Connection) -> bool:
    hostname = socket.gethostname()
    return any(abandoned(conn, table, hostname) for table in TABLES)


def mark_interrupted(conn: sqlite3.Connection, found_at: str) -> int:
    """Mark abandoned sessions and comparisons 'interrupted', noting when; how many were."""
    hostname = socket.gethostname()
    marked = 0
    for table in TABLES:
        for row_id in abandoned(conn, table, hostname):
            cur = conn.execute(
                f"UPDATE {table} SET status = 'interrupted', found_interrupted_at = ?"
                " WHERE id = ? AND status = 'running'",
                (found_at, row_id),
            )
            marked += cur.rowcount
    return marked
