"""What every run of one command shares: the results store, the host it reads, where run files
go, how it reports, and the clock its records are stamped with.

`RunContext.of` is the one place these come from the command's `Environment`: the /proc and /sys
roots in particular are never defaulted anywhere below, so a run against a recorded host cannot
read the live one by omission.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pgdyno.environment import Environment
from pgdyno.postgres.server_lock import ServerLock
from pgdyno.records import RunCell, RunRecord
from pgdyno.remote.host import RemoteHost
from pgdyno.results.encode import now_iso
from pgdyno.results.interface import ResultsBackend


class ProgressReporter(Protocol):
    def planned(self, cells: list[RunCell], seconds_per_run: float) -> None: ...
    def phase(self, text: str) -> None: ...
    def tick(self, cell: RunCell, elapsed_s: float) -> None: ...
    def finished(self, cell: RunCell, record: RunRecord, run_id: int) -> None: ...
    def skipped(self, count: int) -> None: ...  # runs an earlier command finished
    def once(self, key: str, text: str) -> None: ...  # a line said once per `key` and command


@dataclass(frozen=True)
class RemoteTarget:
    """A server benchmarked over SSH: the host (its copy of /proc and /sys is the context's
    roots), the server as that host reaches it, and where pgbench should run."""

    host: RemoteHost
    dsn: str  # as the remote host connects (no password)
    driver: str  # auto, remote or local (remote/host.py DRIVERS)
    pgbench: str | None = None  # its path there, when the user names it


@dataclass(frozen=True)
class RunContext:
    """Fixed for a whole `bench` or `compare`; passed to every step instead of ten parameters."""

    store: ResultsBackend
    env: Mapping[str, str]  # the variables pgbench inherits (a target adds its password)
    proc_root: Path
    sys_root: Path
    run_root: Path  # run files live under run_root/session-N/run-M until processed
    log: Callable[[str], None]
    progress: ProgressReporter
    keep_files: bool
    clock: Callable[[], str]  # an ISO 8601 timestamp: a run's started_at and finished_at
    remote: RemoteTarget | None = None  # the target is on another host, reached over SSH
    server_lock: ServerLock | None = None  # an existing server's benchmark lock, held throughout
    # The session target whose earlier runs size a run's latency sample (recent_tps): a
    # compare's sessions are named for its plan, not for the server of each set.
    history_target: str | None = None

    @classmethod
    def of(
        cls,
        environment: Environment,
        store: ResultsBackend,
        *,
        log: Callable[[str], None],
        progress: ProgressReporter,
        keep_files: bool,
        clock: Callable[[], str] = now_iso,
    ) -> RunContext:
        """The context of a command run in `environment`."""
        return cls(
            store=store,
            env=environment.env,
            proc_root=environment.proc_root,
            sys_root=environment.sys_root,
            run_root=environment.runs_dir,
            log=log,
            progress=progress,
            keep_files=keep_files,
            clock=clock,
        )
