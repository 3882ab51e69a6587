"""Statements run over several sessions at once, each a thread with its own connection.

The loader hands out tasks (a few statements that run in order, e.g. all rows of one warehouse)
to `sessions` threads. The first failure stops the others: no new task starts and the statements
still running are cancelled on the server. Whatever happens, every thread has ended and every
connection is closed when `run_tasks` returns or raises.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgdyno.errors import PgdynoError
from pgdyno.postgres.client import connect
from pgdyno.postgres.server import backend_pid, cancel_backends

_JOIN_TICK_S = 0.2  # how often the waiting thread wakes, so that a signal's handler can run


@dataclass(frozen=True)
class Step:
    query: str
    params: Mapping[str, object] | None = None


Task = tuple[Step, ...]


class _Pool:
    def __init__(self, dsn: str, password: str | None, tasks: Sequence[Task]) -> None:
        self.dsn = dsn
        self.password = password
        self.tasks = deque(tasks)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.pids: set[int] = set()

    def next_task(self) -> Task | None:
        with self.lock:
            return None if self.stop.is_set() or not self.tasks else self.tasks.popleft()

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            if self.failure is None and not self.stop.is_set():
                self.failure = exc
        self.stop.set()

    def work(self) -> None:
        try:
            with connect(self.dsn, self.password) as client:
                pid = backend_pid(client)
                with self.lock:
                    self.pids.add(pid)
                while (task := self.next_task()) is not None:
                    for step in task:
                        if self.stop.is_set():
                            return
                        client.run(step.query, step.params)
        except BaseException as exc:  # reported by the waiting thread, never lost in this one
            self.fail(exc)

    def cancel_running(self) -> None:
        """Cancel what the sessions run now; if the server cannot be reached, they end on their
        own (the connection breaks, or the statement ends and `stop` holds them)."""
        with self.lock:
            pids = sorted(self.pids)
        if not pids:
            return
        try:
            with connect(self.dsn, self.password) as client:
                cancel_backends(client, pids)
        except PgdynoError:
            pass


def run_tasks(dsn: str, password: str | None, tasks: Sequence[Task], sessions: int) -> None:
    """Run every task, each on one session, over min(sessions, len(tasks)) sessions; raise the
    first failure (a PgdynoError from the client, as it came)."""
    pool = _Pool(dsn, password, tasks)
    threads = [
        threading.Thread(target=pool.work, name=f"pgdyno-tpcc-load-{n}")
        for n in range(min(sessions, len(tasks)))
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive() and not pool.stop.is_set():
                thread.join(_JOIN_TICK_S)
    finally:
        # On an interrupt (or the failure above): stop handing out tasks, cancel, wait for all.
        if any(thread.is_alive() for thread in threads):
            pool.stop.set()
            pool.cancel_running()
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join()
    if pool.failure is not None:
        raise pool.failure
