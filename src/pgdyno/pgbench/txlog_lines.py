"""Reading one thread's per-transaction log: a line, or a chunk of lines counted in bulk.

A chunk's columns are checked and counted with string operations that run in C; a chunk that
fails a check is read again line by line (`parse_line`) to name the line at fault. The result
is one `Part` per completion second: its latency tokens counted as written, and its lags.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from pgdyno.errors import ParseError

SKIPPED = "skipped"
FAILURE_WORDS = frozenset({"failed", "serialization", "deadlock", "other"})
_WORDS = FAILURE_WORDS | {SKIPPED}
_FIELD_COUNTS = (6, 7, 8)


class LogLine(NamedTuple):
    """One line of a per-transaction log. Times are in microseconds."""

    client_id: int
    transaction_no: int
    latency_us: int | None  # None when skipped or failed
    outcome: str  # "ok", "skipped", or the failure word ("failed", "serialization", ...)
    script_no: int
    epoch_s: int  # completion time: unix epoch seconds ...
    epoch_us: int  # ... and microseconds into that second
    lag_us: int | None  # schedule_lag, under -R
    retries: int | None  # under --max-tries other than 1


def _whole(token: str, name: str, signed: bool = False) -> int:
    digits = token[1:] if signed and token.startswith("-") else token
    if not (digits.isascii() and digits.isdigit()):
        raise ParseError(f"field {name} is not a whole number: {token!r}")
    return int(token)


def parse_line(line: str, with_lag: bool = True) -> LogLine:
    """Read one line of a per-transaction log of PostgreSQL 14 to 18.

    ``with_lag`` says whether a 7th field is ``schedule_lag`` (``-R``) rather than
    ``retries`` (``--max-tries`` other than 1 without ``-R``); 8 fields always hold both.

    >>> parse_line("0 81 4621 0 1412881037 912698 3005")[2:]
    (4621, 'ok', 0, 1412881037, 912698, 3005, None)
    >>> parse_line("2 0 failed 0 1499414498 86248 9", with_lag=False)[2:]
    (None, 'failed', 0, 1499414498, 86248, None, 9)
    """
    fields = line.split()
    n = len(fields)
    if n not in _FIELD_COUNTS:
        raise ParseError(f"{n} fields, not 6, 7 or 8, in {line.strip()!r}")
    time = fields[2]
    latency: int | None = None
    if time.isascii() and time.isdigit():
        latency, outcome = int(time), "ok"
    elif time in _WORDS:
        outcome = time
    else:
        raise ParseError(f"the time field {time!r} is neither a number nor a known word")
    has_lag = n == 8 or (n == 7 and with_lag)
    return LogLine(
        client_id=_whole(fields[0], "client_id"),
        transaction_no=_whole(fields[1], "transaction_no"),
        latency_us=latency,
        outcome=outcome,
        script_no=_whole(fields[3], "script_no"),
        epoch_s=_whole(fields[4], "time_epoch"),
        epoch_us=_whole(fields[5], "time_us"),
        lag_us=_whole(fields[6], "schedule_lag", signed=True) if has_lag else None,
        retries=_whole(fields[-1], "retries") if n == 8 or (n == 7 and not with_lag) else None,
    )


def _digits(column: list[str]) -> bool:
    """Whether every token is made of ASCII digits only (bytes.isdigit is the fast one)."""
    return "".join(column).encode().isdigit()


def _same_length(column: list[str]) -> bool:
    """Whether every token has the length of the first: then the n - 1 spaces of the joined
    column are exactly at every (length + 1)th place."""
    width = len(column[0])
    joined = " ".join(column)
    return len(joined) == len(column) * (width + 1) - 1 and joined[width :: width + 1] == " " * (
        len(column) - 1
    )


class Part:
    """What one file logged in one second: latency tokens counted as written, and lags."""

    __slots__ = ("lag_max", "lag_n", "lag_sum", "line", "logged", "path", "times")

    def __init__(self, path: Path, line: int) -> None:
        self.path = path
        self.line = line  # of its first line, for messages
        self.times: Counter[str] = Counter()  # digits, or a word from _WORDS
        self.logged = 0
        self.lag_sum = 0
        self.lag_n = 0
        self.lag_max: int | None = None

    def add_lags(self, lags: list[int]) -> None:
        if lags:
            self.lag_sum += sum(lags)
            self.lag_n += len(lags)
            top = max(lags)
            if self.lag_max is None or top > self.lag_max:
                self.lag_max = top


class _Chunk(NamedTuple):
    """A chunk's columns, checked for bulk counting."""

    fields: int
    epochs: list[str]
    times: list[str]
    lags: list[str] | None
    words: bool  # some latencies are words (skipped, failed): their lags are not counted


def _lag_values(times: list[str], lags: list[str], words: bool) -> list[int]:
    """The schedule lags of the transactions that have a latency."""
    if words:
        return [int(g) for t, g in zip(times, lags, strict=True) if t.isdigit()]
    return list(map(int, lags))


class FileReader:
    """Turns the chunks of one thread's log into one :class:`Part` per second."""

    def __init__(self, path: Path, with_lag: bool) -> None:
        self.path = path
        self.with_lag = with_lag
        self.fields: int | None = None  # per line, fixed by the first line
        self.lines = 0  # lines read so far
        self.second: int | None = None
        self.part: Part | None = None

    def _columns(self, fields: int) -> tuple[int | None, tuple[int, ...]]:
        """The lag column, if any, and the columns that must be plain digits."""
        lag = 6 if fields == 8 or (fields == 7 and self.with_lag) else None
        digits = (0, 1, 3, 5, *range(6, fields))  # a lag may be "-0": slow path
        return lag, digits

    def _start(self, second: int, line: int, done: list[tuple[int, Part]]) -> Part:
        if self.part is not None and self.second is not None:
            done.append((self.second, self.part))
        self.second = second
        self.part = Part(self.path, line)
        return self.part

    def feed(self, text: str) -> list[tuple[int, Part]]:
        """Take whole lines (``text`` ends with a newline); return the seconds completed."""
        n = text.count("\n")
        first_line = self.lines + 1
        self.lines += n
        done = self._fast(text, n, first_line)
        return self._slow(text, first_line) if done is None else done

    def finish(self) -> list[tuple[int, Part]]:
        if self.part is None or self.second is None:
            return []
        return [(self.second, self.part)]

    def _fast(self, text: str, n: int, first_line: int) -> list[tuple[int, Part]] | None:
        """Count a chunk in bulk, or return None, having changed nothing, if any check fails."""
        chunk = self._bulk_columns(text, n)
        if chunk is None:
            return None
        self.fields = chunk.fields
        return self._count_seconds(chunk, n, first_line)

    def _bulk_columns(self, text: str, n: int) -> _Chunk | None:
        """The chunk's columns if every line passes the checks that make bulk counting exact."""
        tokens = text.split()
        fields = self.fields or len(text[: text.find("\n")].split())
        if fields not in _FIELD_COUNTS or len(tokens) != fields * n:
            return None
        lag_col, digit_cols = self._columns(fields)
        if not all(_digits(tokens[col::fields]) for col in digit_cols):
            return None
        epochs = tokens[4::fields]
        if not self._in_time_order(epochs):
            return None
        times = tokens[2::fields]
        words = not _digits(times)
        if words and any(t not in _WORDS and not t.isdigit() for t in set(times)):
            return None
        lags = tokens[lag_col::fields] if lag_col is not None else None
        return _Chunk(fields, epochs, times, lags, words)

    def _in_time_order(self, epochs: list[str]) -> bool:
        """Whether the completion seconds are plain numbers, sorted, and not before the last."""
        # Equal-length digit strings sort like the numbers they spell.
        if not _digits(epochs) or not _same_length(epochs) or epochs != sorted(epochs):
            return False
        return self.second is None or int(epochs[0]) >= self.second

    def _count_seconds(self, chunk: _Chunk, n: int, first_line: int) -> list[tuple[int, Part]]:
        """Add a checked chunk to the parts of its seconds, one slice of lines per second."""
        epochs, times, lags = chunk.epochs, chunk.times, chunk.lags
        done: list[tuple[int, Part]] = []
        i = 0
        while i < n:
            stamp = epochs[i]
            j = bisect_right(epochs, stamp, i)
            second = int(stamp)
            part = self.part
            if second != self.second or part is None:
                part = self._start(second, first_line + i, done)
            segment = times[i:j]
            part.times.update(segment)
            part.logged += j - i
            if lags is not None:
                part.add_lags(_lag_values(segment, lags[i:j], chunk.words))
            i = j
        return done

    def _slow(self, text: str, first_line: int) -> list[tuple[int, Part]]:
        """Read a chunk line by line, naming the first line that is wrong."""
        done: list[tuple[int, Part]] = []
        for line_no, line in enumerate(text.split("\n")[:-1], start=first_line):
            if not line.strip():
                continue
            where = f"Transaction log {self.path} line {line_no}"
            try:
                row = parse_line(line, self.with_lag)
            except ParseError as e:
                raise ParseError(f"{where}: {e}.") from None
            fields = len(line.split())
            if self.fields is None:
                self.fields = fields
            elif fields != self.fields:
                raise ParseError(
                    f"{where} has {fields} fields where the first line has {self.fields}: "
                    f"{line.strip()!r}."
                )
            part = self.part
            if self.second is None or row.epoch_s != self.second or part is None:
                if self.second is not None and row.epoch_s < self.second:
                    raise ParseError(
                        f"{where} completed at {row.epoch_s}, before the line above it "
                        f"({self.second}), but pgbench writes lines in completion order."
                    )
                part = self._start(row.epoch_s, line_no, done)
            part.times[row.outcome if row.latency_us is None else str(row.latency_us)] += 1
            part.logged += 1
            if row.lag_us is not None and row.latency_us is not None:
                part.add_lags([row.lag_us])
        return done
