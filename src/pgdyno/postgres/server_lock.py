"""One benchmark at a time on a server: two pgdyno commands benchmarking one server (from two
work directories, two machines, or a hosts file that names it twice) would reset each other's
datasets and change each other's settings mid-run.

The lock is a session-level advisory lock held on a connection of its own for as long as the
command benchmarks the server: it ends with that connection, so a killed pgdyno leaves nothing
to clean up. A server restart (a set that needs one) ends the session too: `renew` takes the
lock again on a new connection, and refuses if another pgdyno took it in between.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from pgdyno.errors import ClusterError, ConnectionLost, PgdynoError
from pgdyno.postgres.client import Client, with_param
from pgdyno.postgres.queries import load
from pgdyno.postgres.server import ping

BENCH_LOCK = 0x7067_6462  # "pgdb": the key of the benchmark lock (the results store uses "pgdy")
APPLICATION = "pgdyno benchmark lock"  # the lock's connection, as pg_stat_activity shows it
# A lock refused but held by nobody is tried again, this many times this far apart.
TAKE_TRIES, TAKE_PAUSE_S = 10, 0.2


class ServerLock:
    """The benchmark lock of one server, held by this process."""

    def __init__(self, dsn: str, password: str | None, label: str) -> None:
        self.dsn = with_param(dsn, "application_name", APPLICATION)
        self.password, self.label = password, label
        self.client = self._take()

    def _take(self) -> Client:
        client = Client(self.dsn, self.password)
        try:
            for _ in range(TAKE_TRIES):
                if client.records(load("bench_lock_take"), _Taken, {"key": BENCH_LOCK})[0].taken:
                    return client
                holder = _holder(client)
                if holder:
                    break
                # Refused, yet nobody holds it now: the holder's session was ending (a pgdyno
                # killed just before; its server process still exiting). Seen in the suite.
                time.sleep(TAKE_PAUSE_S)
            raise ClusterError(
                f"another pgdyno is benchmarking {self.label}{holder}: wait for it to finish, "
                "or benchmark another server."
            )
        except BaseException:
            client.close()
            raise

    def renew(self) -> None:
        """Still held, or taken again when a restart ended the session that held it."""
        try:
            ping(self.client)
        except ConnectionLost:
            self.client.close()
            self.client = self._take()

    def close(self) -> None:
        # Let go first: the server process ends after the connection closes, and until then
        # the next command on this server found the lock still held (seen in the suite).
        with suppress(PgdynoError):
            self.client.records(load("bench_lock_release"), _Released, {"key": BENCH_LOCK})
        self.client.close()


def _holder(client: Client) -> str:
    """Who holds the lock, as far as this role may see: ' (server process N, ...)' or ''."""
    rows = client.records(load("bench_lock_holder"), _Holder, {"key": BENCH_LOCK})
    if not rows:
        return ""  # let go just now
    holder = rows[0]
    where = f" from {holder.address}" if holder.address else ""
    since = f" since {holder.started} UTC" if holder.started else ""
    return f" (its lock is held by server process {holder.pid}{where}{since})"


@dataclass(frozen=True)
class _Taken:
    taken: bool


@dataclass(frozen=True)
class _Released:
    released: bool


@dataclass(frozen=True)
class _Holder:
    """queries/bench_lock_holder.sql: the holder's backend, its client address (None over a
    Unix socket) and its start in UTC; None for what the role may not see."""

    pid: int
    address: str | None
    started: str | None


@contextmanager
def server_lock(dsn: str, password: str | None, label: str) -> Iterator[ServerLock]:
    """The benchmark lock of the server `dsn` names, for the block; ClusterError naming the
    holder when another pgdyno has it."""
    lock = ServerLock(dsn, password, label)
    try:
        yield lock
    finally:
        lock.close()
