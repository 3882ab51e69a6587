"""Why a run failed, in words a user can act on: the server stopped, or a disk filled up.

pgbench only says "Run was aborted"; the cause is in the server log, the mount table and the
state of the server. `explain` is pure (facts in, sentence out); `gather` collects the facts.
A fault that every later run would share (server gone, disk full) is marked `fatal`: the sweep
stops there instead of storing a row of identical failures.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pgdyno import process
from pgdyno.errors import ConnectionFailed, ConnectionLost, ParseError, PgbenchFailed
from pgdyno.host.disks import device_for_path
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.serverlog import LogProblem, problems_since
from pgdyno.records import RunRecord

NO_SPACE = "No space left on device"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Verdict:
    reason: str  # what happened, one clause
    advice: str  # what to do about it
    fatal: bool  # later runs would fail the same way: stop the sweep

    @property
    def sentence(self) -> str:
        """For the run's record."""
        return f"{self.reason}; {self.advice}" if self.advice else self.reason

    def sweep_stopped(self, run_id: int, session_id: int) -> str:
        """The one sentence a sweep ends with when this run's fault would fail the next ones.

        >>> Verdict("the disk filled up", "free some space", True).sweep_stopped(7, 2)
        'the sweep stopped at run 7: the disk filled up; run 7 (failed) and the runs finished before it are saved in the results database (session 2); free some space.'
        """  # noqa: E501
        return (
            f"the sweep stopped at run {run_id}: {self.reason}; run {run_id} (failed) and the "
            f"runs finished before it are saved in the results database (session {session_id}); "
            f"{self.advice}."
        )


@dataclass(frozen=True)
class Facts:
    """What is known about a failed run, gathered right after it failed."""

    error: str  # pgdyno's own account (pgbench's exit code and telling line, ...)
    stderr: str  # pgbench's stderr
    problems: Sequence[LogProblem]  # server log lines written during the run
    server: str  # "up" | "stopped" | "restarted"
    log: Path | None  # the server log, when pgdyno knows it (the sandbox)
    data_disk: str | None  # "the disk under /x (ext4 /, 3 MiB free)"
    files_disk: str | None  # the same for the directory of pgbench's files
    sandbox: bool  # pgdyno manages the server (its advice names --workdir)


def explain(facts: Facts) -> Verdict:
    """The verdict on a failed run.

    >>> gone = Facts("pgbench failed (exit code 2): Run was aborted", "", [], "stopped",
    ...              Path("/w/log/postgresql.log"), None, None, True)
    >>> explain(gone).reason
    'the PostgreSQL server stopped during the run (see its log: /w/log/postgresql.log)'
    >>> explain(Facts("pgbench failed (exit code 1): syntax error", "", [], "up", None, None,
    ...               None, True))
    Verdict(reason='pgbench failed (exit code 1): syntax error', advice='', fatal=False)
    """
    full = _disk_full(facts)
    if full is not None:
        return full
    if facts.server != "up":
        what = "stopped" if facts.server == "stopped" else "crashed and restarted"
        return Verdict(
            f"the PostgreSQL server {what} during the run ({_see_log(facts)})",
            "run the command again once the cause is dealt with",
            fatal=True,
        )
    return Verdict(facts.error, "", fatal=False)


def _see_log(facts: Facts, *, quote: bool = True) -> str:
    """Where to read more, with the log's most telling line when `quote`."""
    where = f"see its log: {facts.log}" if facts.log else "see the server's log"
    telling = _telling(facts.problems) if quote else None
    return f"{where}: {telling.level}: {telling.message}" if telling else where


def _telling(problems: Sequence[LogProblem]) -> LogProblem | None:
    """The line that best says why the server went away: a PANIC, else a process killed by a
    signal, else the first FATAL (later ones are its consequences), else any other death."""
    ranked: tuple[Callable[[LogProblem], bool], ...] = (
        lambda p: p.level == "PANIC",
        lambda p: p.level == "LOG" and "terminated by signal" in p.message,
        lambda p: p.level == "FATAL",
        lambda p: p.level == "LOG",
    )
    for matches in ranked:
        for problem in problems:
            if matches(problem):
                return problem
    return None


def _disk_full(facts: Facts) -> Verdict | None:
    server_side = [p for p in facts.problems if NO_SPACE in p.message]
    client_side = [line for line in facts.stderr.splitlines() if NO_SPACE in line]
    if not server_side and not client_side and NO_SPACE not in facts.error:
        return None
    if server_side:
        message = server_side[0].message
        disk = facts.data_disk or "the server's disk"
        said = f"PostgreSQL {message}" if message.startswith("could not") else message
    elif client_side:
        said = client_side[0].strip()
        disk = facts.data_disk or facts.files_disk or "the server's disk"
    else:
        said = facts.error
        disk = facts.files_disk or "the disk of the work directory"
    stopped = ""
    if facts.server != "up":  # the log line quoted above is usually why: not twice
        stopped = f"; the server stopped ({_see_log(facts, quote=not server_side)})"
    advice = "free some space or use a larger --workdir" if facts.sandbox else "free some space"
    return Verdict(f"{disk} filled up during the run: {said}{stopped}", advice, fatal=True)


def describe_disk(path: Path | None, proc_root: Path, sys_root: Path) -> str | None:
    """The words naming the disk under `path`: "the disk under PATH (FSTYPE MOUNT, N MiB free)"."""
    if path is None:
        return None
    try:
        free = f"{shutil.disk_usage(path).free // MIB:,} MiB free"
    except OSError:
        free = "free space unknown"
    try:
        device = device_for_path(path, proc_root, sys_root)
    except (OSError, ParseError):
        device = None
    if device is None:
        return f"the disk under {path} ({free})"
    source = "" if device.source in (device.fstype, "none") else f"{device.source} "
    return f"the disk under {path} ({source}{device.fstype} {device.mount_point}, {free})"


def server_state(client: Client, dsn: str, password: str | None, data_path: Path | None) -> str:
    """How the server is: "up", "stopped" or "restarted" (a crash restart cut every session)."""
    try:
        client.rows("SELECT 1")
        return "up"
    except ConnectionLost:
        pass
    running = _postmaster_running(data_path)
    if running:
        # A crash restart keeps the postmaster; a killed one can take a moment to be gone
        # (tearing down its shared memory), so it counts as stopped if it goes now.
        running = not _gone_soon(data_path)
    if running is not None:
        return "restarted" if running else "stopped"
    try:
        with connect(dsn, password):
            return "restarted"
    except ConnectionFailed:
        return "stopped"


POSTMASTER_EXIT_WAIT_S = 3.0


def _gone_soon(data_path: Path | None, wait_s: float = POSTMASTER_EXIT_WAIT_S) -> bool:
    """Whether the postmaster stops running within `wait_s` seconds."""
    return process.wait_until(lambda: not _postmaster_running(data_path), wait_s)


def _postmaster_running(data_path: Path | None) -> bool | None:
    """Whether the postmaster of a local data directory runs; None when that is not known."""
    if data_path is None:
        return None
    try:
        first = (data_path / "postmaster.pid").read_text().splitlines()[0]
    except FileNotFoundError:
        return False  # a clean shutdown (or startup failure) removes it
    except (OSError, IndexError):
        return None
    return first.strip().isdigit() and process.pid_alive(int(first))


@dataclass(frozen=True)
class Where:
    """Where to look after a failure: fixed for a whole session."""

    client: Client
    dsn: str
    password: str | None
    server_log: Path | None
    data_path: Path | None
    proc_root: Path
    sys_root: Path


def gather(where: Where, error: str, stderr: str, log_mark: int, run_dir: Path) -> Verdict:
    """Look at the server, its log and the disks right after a run failed; the verdict."""
    facts = Facts(
        error=error,
        stderr=stderr,
        problems=problems_since(where.server_log, log_mark),
        server=server_state(where.client, where.dsn, where.password, where.data_path),
        log=where.server_log,
        data_disk=describe_disk(where.data_path, where.proc_root, where.sys_root),
        files_disk=describe_disk(_existing(run_dir), where.proc_root, where.sys_root),
        sandbox=where.server_log is not None,
    )
    return explain(facts)


def failed_run(
    where: Where,
    record: RunRecord,
    exc: Exception,
    log_mark: int,
    run_dir: Path,
    *,
    clock: Callable[[], str],
) -> tuple[RunRecord, Verdict | None]:
    """The record of a run that failed with `exc`, its cause found in the server log, the disks
    and the server; and the verdict when that cause ends the sweep. `clock` stamps finished_at."""
    stderr = exc.stderr if isinstance(exc, PgbenchFailed) else ""
    error = str(exc)
    if isinstance(exc, OSError):
        error = f"pgdyno could not read or write {exc.filename or 'a file'}: {exc.strerror}"
    verdict = gather(where, error, stderr, log_mark, run_dir)
    failed = replace(
        record, status="failed", finished_at=clock(), error=verdict.sentence,
        stderr=stderr[-20000:],
    )  # fmt: skip
    return failed, verdict if verdict.fatal else None


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
