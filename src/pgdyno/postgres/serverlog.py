"""Checkpoint events from the server log (`log_checkpoints = on`).

The sandbox writes ``log_line_prefix = '%m [%p] '`` with ``log_timezone = UTC``, so a line is::

    2026-11-21 13:34:05.123 UTC [4242] LOG:  checkpoint starting: time
    2026-11-21 13:34:32.050 UTC [4242] LOG:  checkpoint complete: wrote 1490 buffers (9.1%); ...

A standby writes ``restartpoint`` instead of ``checkpoint``. What the "complete" line holds
grew over the versions (every version here writes the items in this order):

* 14 and 15: ``wrote N buffers (x%); A WAL file(s) added, R removed, C recycled; write=W s,
  sync=S s, total=T s; sync files=F, longest=L s, average=V s; distance=D kB, estimate=E kB``
* 16 and 17 add ``; lsn=X/X, redo lsn=X/X`` at the end;
* 18 also writes ``wrote N buffers (x%), wrote M SLRU buffers;`` at the start.

The "starting" line gives the reason as the checkpoint's flags: ``time``, ``wal``, ``immediate
force wait`` (a ``CHECKPOINT`` command; ``... wal`` when a WAL request was pending too),
``immediate force wait flush-all`` (CREATE DATABASE on 14), ``shutdown immediate``, ...
Each number is read on its own, so a field a version lacks is None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "CheckpointEvent",
    "LogProblem",
    "LogTail",
    "log_end",
    "parse_checkpoint_line",
    "parse_checkpoint_log",
    "parse_problem_line",
    "problems_since",
]


@dataclass(frozen=True, slots=True)
class CheckpointEvent:
    """One "checkpoint starting" or "checkpoint complete" line."""

    at: float  # unix epoch seconds, from the line's timestamp
    phase: str  # "start" | "complete"
    kind: str  # "checkpoint" | "restartpoint"
    reason: str  # "time", "wal", "immediate force wait", ...; a complete event takes its start's
    buffers: int | None = None
    buffers_pct: float | None = None  # of shared_buffers
    slru_buffers: int | None = None  # 18+
    wal_added: int | None = None
    wal_removed: int | None = None
    wal_recycled: int | None = None
    write_s: float | None = None
    sync_s: float | None = None
    total_s: float | None = None
    sync_files: int | None = None
    sync_longest_s: float | None = None
    sync_average_s: float | None = None
    distance_kb: int | None = None
    estimate_kb: int | None = None
    lsn: str | None = None  # 16+
    redo_lsn: str | None = None  # 16+


_LINE = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<zone>\S+) \[\d+\] LOG:\s+"
    r"(?P<kind>checkpoint|restartpoint) (?P<phase>starting|complete): ?(?P<rest>.*?)\s*$"
)
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_LSN = r"([0-9A-F]+/[0-9A-F]+)"
_FIELDS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(rf"wrote {_NUM} buffers \({_NUM}%\)"), ("buffers", "buffers_pct")),
    (re.compile(rf"wrote {_NUM} SLRU buffers"), ("slru_buffers",)),
    (
        re.compile(rf"{_NUM} WAL file\(s\) added, {_NUM} removed, {_NUM} recycled"),
        ("wal_added", "wal_removed", "wal_recycled"),
    ),
    (
        re.compile(rf"write={_NUM} s, sync={_NUM} s, total={_NUM} s"),
        ("write_s", "sync_s", "total_s"),
    ),
    (
        re.compile(rf"sync files={_NUM}, longest={_NUM} s, average={_NUM} s"),
        ("sync_files", "sync_longest_s", "sync_average_s"),
    ),
    (re.compile(rf"distance={_NUM} kB, estimate={_NUM} kB"), ("distance_kb", "estimate_kb")),
    (re.compile(rf"(?<!redo )lsn={_LSN}"), ("lsn",)),
    (re.compile(rf"redo lsn={_LSN}"), ("redo_lsn",)),
]
_FLOATS = {"buffers_pct", "write_s", "sync_s", "total_s", "sync_longest_s", "sync_average_s"}
_TEXT = {"lsn", "redo_lsn"}


def _epoch(date: str, zone: str) -> float | None:
    """Seconds since the epoch of a `%m` timestamp; None for a zone other than UTC or an offset.

    >>> _epoch("1970-01-01 00:01:00.250", "UTC"), _epoch("1970-01-01 02:00:00", "+02")
    (60.25, 0.0)
    """
    if zone in ("UTC", "GMT", "Z"):
        tz = UTC
    else:
        offset = re.fullmatch(r"([+-])(\d\d):?(\d\d)?", zone)
        if offset is None:
            return None  # a zone abbreviation such as CET: its offset is not in the line
        sign = -1 if offset.group(1) == "-" else 1
        tz = timezone(
            sign * timedelta(hours=int(offset.group(2)), minutes=int(offset.group(3) or 0))
        )
    return datetime.fromisoformat(date).replace(tzinfo=tz).timestamp()


def parse_checkpoint_line(line: str) -> CheckpointEvent | None:
    """The checkpoint event of one server log line; None for any other line.

    >>> e = parse_checkpoint_line("2026-11-21 13:34:05.123 UTC [42] LOG:  checkpoint starting: wal")
    >>> e.at, e.phase, e.kind, e.reason
    (1795268045.123, 'start', 'checkpoint', 'wal')
    >>> parse_checkpoint_line("2026-11-21 13:34:05.123 UTC [42] LOG:  database system is ready")
    """
    match = _LINE.match(line)
    if match is None:
        return None
    at = _epoch(match["date"], match["zone"])
    if at is None:
        return None
    rest = match["rest"]
    if match["phase"] == "starting":
        return CheckpointEvent(at, "start", match["kind"], rest)
    numbers: dict[str, Any] = {}
    for pattern, names in _FIELDS:
        found = pattern.search(rest)
        if found is None:
            continue
        for name, text in zip(names, found.groups(), strict=True):
            if name in _TEXT:
                numbers[name] = text
            elif name in _FLOATS:
                numbers[name] = float(text)
            else:
                numbers[name] = int(text)
    return CheckpointEvent(at, "complete", match["kind"], "", **numbers)


def parse_checkpoint_log(lines: Iterable[str]) -> list[CheckpointEvent]:
    """The checkpoint events of a server log, in order; a complete event gets its start's reason."""
    events: list[CheckpointEvent] = []
    reasons: dict[str, str] = {}
    for line in lines:
        event = _with_reason(parse_checkpoint_line(line), reasons)
        if event is not None:
            events.append(event)
    return events


def _with_reason(event: CheckpointEvent | None, reasons: dict[str, str]) -> CheckpointEvent | None:
    """Remember a start's reason (by kind) and give it to the complete event that follows."""
    if event is None:
        return None
    if event.phase == "start":
        reasons[event.kind] = event.reason
        return event
    return replace(event, reason=reasons.pop(event.kind, ""))


class LogTail:
    """Reads the checkpoint events appended to a server log since `start()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._reasons: dict[str, str] = {}

    def start(self) -> None:
        """Remember where the log ends now (0 when it does not exist yet)."""
        try:
            self._offset = self.path.stat().st_size
        except FileNotFoundError:
            self._offset = 0
        self._reasons = {}

    def read_events(self) -> list[CheckpointEvent]:
        """Events in the complete lines written since the last call (or `start()`).

        A last line without its newline yet is left for the next call. A log that shrank
        (truncated or replaced) is read again from its beginning.
        """
        try:
            with self.path.open("rb") as handle:
                size = handle.seek(0, 2)
                if size < self._offset:
                    self._offset = 0
                handle.seek(self._offset)
                data = handle.read(size - self._offset)
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # 0 when no line is complete yet
        self._offset += end
        events = []
        for line in data[:end].decode("utf-8", errors="replace").splitlines():
            event = _with_reason(parse_checkpoint_line(line), self._reasons)
            if event is not None:
                events.append(event)
        return events


# -- what went wrong: the error lines of a failed run ---------------------------------------


@dataclass(frozen=True, slots=True)
class LogProblem:
    """A line that tells why a run failed: ERROR, FATAL, PANIC, or a server process's death."""

    at: float | None
    level: str  # "ERROR" | "FATAL" | "PANIC" | "LOG"
    message: str


_PROBLEM = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<zone>\S+) \[\d+\] "
    r"(?P<level>ERROR|FATAL|PANIC|LOG):\s+(?P<message>.*?)\s*$"
)
# LOG lines by which the postmaster reports a child's death (the cause of a crash restart).
_DEATH = re.compile(r"was terminated by signal|exited with exit code|terminating any other")
# The most a failed run's share of the log is read for its problems (the newest part).
PROBLEM_SCAN_BYTES = 4 * 1024 * 1024


def parse_problem_line(line: str) -> LogProblem | None:
    """The problem one server log line reports; None for any other line.

    >>> parse_problem_line('2026-11-23 01:31:23.264 UTC [6578] PANIC:  could not write to file '
    ...                    '"pg_wal/xlogtemp.6578": No space left on device').message
    'could not write to file "pg_wal/xlogtemp.6578": No space left on device'
    >>> parse_problem_line("2026-11-23 01:31:23.265 UTC [6483] LOG:  client backend (PID 6578) "
    ...                    "was terminated by signal 6: Aborted").level
    'LOG'
    >>> parse_problem_line("2026-11-23 01:31:23.270 UTC [6483] LOG:  database system is ready")
    """
    match = _PROBLEM.match(line)
    if match is None:
        return None
    if match["level"] == "LOG" and not _DEATH.search(match["message"]):
        return None
    return LogProblem(_epoch(match["date"], match["zone"]), match["level"], match["message"])


def log_end(path: Path | None) -> int:
    """Where the log ends now: mark it before a run, read its problems from there after."""
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0


def problems_since(path: Path | None, offset: int) -> list[LogProblem]:
    """The problems written to the log after `offset` (all of it when it shrank since)."""
    if path is None:
        return []
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            start = offset if offset <= size else 0
            start = max(start, size - PROBLEM_SCAN_BYTES)
            handle.seek(start)
            data = handle.read(size - start)
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return [problem for problem in map(parse_problem_line, lines) if problem is not None]
