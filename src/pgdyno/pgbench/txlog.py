"""Latency percentiles from pgbench's per-transaction log (``-l`` without ``--aggregate-interval``).

pgbench writes one file per thread (``prefix.PID``, ``prefix.PID.1``, ...), one line per
transaction in the order the thread saw them complete, fields separated by single spaces::

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

``time`` is the latency in microseconds, or a word: ``skipped`` (``-R`` with ``-L``), ``failed``
(15+), or with ``--failures-detailed`` the kind of failure (``serialization``, ``deadlock``;
``other`` is accepted for newer versions). ``time_epoch time_us`` is when the transaction
completed. ``schedule_lag`` is written under ``-R``, ``retries`` when ``--max-tries`` is not 1;
a 7-field line is read as having ``schedule_lag`` unless told otherwise. With
``--sampling-rate R`` pgbench logs each transaction, skipped or failed ones too, with
probability R.

The thread files are merged by completion second with a k-way merge, so memory holds one
second's latencies and the run's histogram (:class:`~pgdyno.stats.histogram.LatencyHistogram`),
not the log. Lines are read in chunks and split in bulk: the columns are checked and counted
with string operations that run in C, and a chunk that fails a check is read again line by line
to name the line at fault.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

from pgdyno.errors import ParseError
from pgdyno.stats.histogram import LatencyHistogram

__all__ = [
    "FAILURE_WORDS",
    "SKIPPED",
    "LatencySummary",
    "LogLine",
    "iter_summaries",
    "parse_line",
    "summarize",
]

SKIPPED = "skipped"
FAILURE_WORDS = frozenset({"failed", "serialization", "deadlock", "other"})
_WORDS = FAILURE_WORDS | {SKIPPED}
_FIELD_COUNTS = (6, 7, 8)
_QUANTILES = (0.5, 0.9, 0.99, 0.999)
_CHUNK_CHARS = 1 << 17  # read size; a chunk's tokens take about 6x this in memory
_MAX_LINE_CHARS = 1 << 16
_MAX_GAP_S = 7 * 86400  # a longer silence between two lines is taken as a corrupt time stamp


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


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latencies of the transactions that completed in one second, or in the whole run.

    ``transactions``, ``failed`` and ``skipped`` are estimates: the logged counts divided by
    the sampling rate and rounded. ``logged`` is the number of lines read. Percentiles are
    over successful transactions and within 1% of the exact ones (see the histogram).
    """

    t: int | None  # epoch second; None for the whole run
    transactions: int  # successful transactions
    logged: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None
    failed: int
    skipped: int
    lag_avg_ms: float | None  # schedule lag of successful transactions, when logged (-R)
    lag_max_ms: float | None
    avg_ms: float | None = None  # exact mean of the logged successful latencies
    min_ms: float | None = None
    stddev_ms: float | None = None  # whole run only (within the histogram's resolution)


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


class _Part:
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


class _FileReader:
    """Turns the chunks of one thread's log into one :class:`_Part` per second."""

    def __init__(self, path: Path, with_lag: bool) -> None:
        self.path = path
        self.with_lag = with_lag
        self.fields: int | None = None  # per line, fixed by the first line
        self.lines = 0  # lines read so far
        self.second: int | None = None
        self.part: _Part | None = None

    def _columns(self, fields: int) -> tuple[int | None, tuple[int, ...]]:
        """The lag column, if any, and the columns that must be plain digits."""
        lag = 6 if fields == 8 or (fields == 7 and self.with_lag) else None
        digits = (0, 1, 3, 5, *range(6, fields))  # a lag may be "-0": slow path
        return lag, digits

    def _start(self, second: int, line: int, done: list[tuple[int, _Part]]) -> _Part:
        if self.part is not None and self.second is not None:
            done.append((self.second, self.part))
        self.second = second
        self.part = _Part(self.path, line)
        return self.part

    def feed(self, text: str) -> list[tuple[int, _Part]]:
        """Take whole lines (``text`` ends with a newline); return the seconds completed."""
        n = text.count("\n")
        first_line = self.lines + 1
        self.lines += n
        done = self._fast(text, n, first_line)
        return self._slow(text, first_line) if done is None else done

    def finish(self) -> list[tuple[int, _Part]]:
        if self.part is None or self.second is None:
            return []
        return [(self.second, self.part)]

    def _fast(self, text: str, n: int, first_line: int) -> list[tuple[int, _Part]] | None:
        """Count a chunk in bulk, or return None, having changed nothing, if any check fails."""
        tokens = text.split()
        fields = self.fields or len(text[: text.find("\n")].split())
        if fields not in _FIELD_COUNTS or len(tokens) != fields * n:
            return None
        lag_col, digit_cols = self._columns(fields)
        for col in digit_cols:
            if not _digits(tokens[col::fields]):
                return None
        epochs = tokens[4::fields]
        # Equal-length digit strings sort like the numbers they spell.
        if not _digits(epochs) or not _same_length(epochs):
            return None
        if epochs != sorted(epochs):
            return None
        if self.second is not None and int(epochs[0]) < self.second:
            return None
        times = tokens[2::fields]
        words = not _digits(times)
        if words and any(t not in _WORDS and not t.isdigit() for t in set(times)):
            return None
        lags = tokens[lag_col::fields] if lag_col is not None else None

        self.fields = fields
        done: list[tuple[int, _Part]] = []
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
                if words:
                    pairs = zip(segment, lags[i:j], strict=True)
                    part.add_lags([int(g) for t, g in pairs if t.isdigit()])
                else:
                    part.add_lags(list(map(int, lags[i:j])))
            i = j
        return done

    def _slow(self, text: str, first_line: int) -> list[tuple[int, _Part]]:
        """Read a chunk line by line, naming the first line that is wrong."""
        done: list[tuple[int, _Part]] = []
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


def _read_parts(path: Path, with_lag: bool) -> Iterator[tuple[int, _Part]]:
    """One thread's log as ``(second, part)`` in time order, reading a chunk at a time."""
    reader = _FileReader(path, with_lag)
    rest = ""
    # ASCII is all pgbench writes; a stray byte becomes U+FFFD and fails the number checks.
    with path.open(encoding="ascii", errors="replace", newline="") as f:
        while data := f.read(_CHUNK_CHARS):
            cut = data.rfind("\n") + 1
            if cut == 0:
                rest += data
                if len(rest) > _MAX_LINE_CHARS:
                    raise ParseError(
                        f"Transaction log {path} line {reader.lines + 1} is longer than "
                        f"{_MAX_LINE_CHARS} characters: not a pgbench transaction log."
                    )
                continue
            yield from reader.feed(rest + data[:cut])
            rest = data[cut:]
    if rest:
        yield from reader.feed(rest + "\n")
    yield from reader.finish()


class _Tally:
    """Counts and lags of a second or of the run (the latencies go to a histogram)."""

    __slots__ = ("failed", "lag_max", "lag_n", "lag_sum", "logged", "skipped")

    def __init__(self) -> None:
        self.logged = self.failed = self.skipped = self.lag_sum = self.lag_n = 0
        self.lag_max: int | None = None

    def add_part(self, part: _Part, histogram: LatencyHistogram) -> None:
        times = part.times
        self.skipped += times.pop(SKIPPED, 0)
        for word in FAILURE_WORDS:
            self.failed += times.pop(word, 0)
        values = dict(zip(map(int, times), times.values(), strict=True))
        if len(values) != len(times):  # "7" and "07": the same latency twice
            values = {}
            for token, count in times.items():
                values[int(token)] = values.get(int(token), 0) + count
        histogram.record_counts(values)
        self.logged += part.logged
        self._add_lags(part.lag_sum, part.lag_n, part.lag_max)

    def add(self, other: _Tally) -> None:
        self.logged += other.logged
        self.failed += other.failed
        self.skipped += other.skipped
        self._add_lags(other.lag_sum, other.lag_n, other.lag_max)

    def _add_lags(self, total: int, n: int, top: int | None) -> None:
        self.lag_sum += total
        self.lag_n += n
        if top is not None and (self.lag_max is None or top > self.lag_max):
            self.lag_max = top


def _estimate(logged: int, sampling_rate: float) -> int:
    return logged if sampling_rate == 1.0 else round(logged / sampling_rate)


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _summary(
    t: int | None, histogram: LatencyHistogram, tally: _Tally, sampling_rate: float
) -> LatencySummary:
    p50, p90, p99, p999 = histogram.quantiles(_QUANTILES)
    return LatencySummary(
        t=t,
        transactions=_estimate(histogram.count, sampling_rate),
        logged=tally.logged,
        p50_ms=_ms(p50),
        p90_ms=_ms(p90),
        p99_ms=_ms(p99),
        p999_ms=_ms(p999),
        max_ms=_ms(histogram.max),
        failed=_estimate(tally.failed, sampling_rate),
        skipped=_estimate(tally.skipped, sampling_rate),
        lag_avg_ms=tally.lag_sum / tally.lag_n / 1000.0 if tally.lag_n else None,
        lag_max_ms=_ms(tally.lag_max),
        avg_ms=_ms(histogram.mean),
        min_ms=_ms(histogram.min),
        stddev_ms=_ms(histogram.stddev) if t is None else None,
    )


def _empty(t: int) -> LatencySummary:
    return LatencySummary(t, 0, 0, None, None, None, None, None, 0, 0, None, None)


def iter_summaries(
    paths: Sequence[Path], sampling_rate: float = 1.0, *, with_lag: bool = True
) -> Iterator[LatencySummary]:
    """Yield one :class:`LatencySummary` per second, then the run's (whose ``t`` is None).

    Seconds run from the first to the last logged completion, empty ones included (with
    ``transactions=0`` and no latencies); the first and last are usually partial. Lazy: the
    files are read as the iterator advances, so rows can be stored as they come.
    Raises :class:`~pgdyno.errors.ParseError` naming the file and line of a malformed line.
    """
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], not {sampling_rate!r}")
    return _summaries([Path(p) for p in paths], sampling_rate, with_lag)


def _summaries(paths: list[Path], sampling_rate: float, with_lag: bool) -> Iterator[LatencySummary]:
    streams = [_read_parts(p, with_lag) for p in paths]
    second_hist, run_hist = LatencyHistogram(), LatencyHistogram()
    second_tally, run_tally = _Tally(), _Tally()
    current: int | None = None
    for t, part in heapq.merge(*streams, key=itemgetter(0)):
        if t != current:
            if current is not None:
                if t - current > _MAX_GAP_S:
                    raise ParseError(
                        f"Transaction log {part.path} line {part.line} completed at {t}, "
                        f"{t - current} s after the previous line of the run: a corrupt time "
                        f"stamp or logs of different runs."
                    )
                yield _summary(current, second_hist, second_tally, sampling_rate)
                run_hist.merge(second_hist)
                run_tally.add(second_tally)
                second_hist.reset()
                second_tally = _Tally()
                for gap in range(current + 1, t):
                    yield _empty(gap)
            current = t
        second_tally.add_part(part, second_hist)
    if current is not None:
        yield _summary(current, second_hist, second_tally, sampling_rate)
        run_hist.merge(second_hist)
        run_tally.add(second_tally)
    yield _summary(None, run_hist, run_tally, sampling_rate)


def summarize(
    paths: Sequence[Path], sampling_rate: float = 1.0, *, with_lag: bool = True
) -> tuple[list[LatencySummary], LatencySummary]:
    """Per-second latency rows and the run's total from pgbench's per-transaction logs.

    ``paths`` are the files of every thread of one run; ``sampling_rate`` is pgbench's
    ``--sampling-rate``; ``with_lag`` is explained in :func:`parse_line`. See
    :func:`iter_summaries`.
    """
    *rows, total = iter_summaries(paths, sampling_rate, with_lag=with_lag)
    return rows, total
