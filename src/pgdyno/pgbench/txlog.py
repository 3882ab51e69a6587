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
to name the line at fault (`pgdyno.pgbench.txlog_lines`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

from pgdyno.errors import ParseError
from pgdyno.pgbench.txlog_lines import (
    FAILURE_WORDS,
    SKIPPED,
    FileReader,
    LogLine,
    Part,
    parse_line,
)
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

_QUANTILES = (0.5, 0.9, 0.99, 0.999)
_CHUNK_CHARS = 1 << 17  # read size; a chunk's tokens take about 6x this in memory
_MAX_LINE_CHARS = 1 << 16
_MAX_GAP_S = 7 * 86400  # a longer silence between two lines is taken as a corrupt time stamp


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


def _read_parts(path: Path, with_lag: bool) -> Iterator[tuple[int, Part]]:
    """One thread's log as ``(second, part)`` in time order, reading a chunk at a time."""
    reader = FileReader(path, with_lag)
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

    def add_part(self, part: Part, histogram: LatencyHistogram) -> None:
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
