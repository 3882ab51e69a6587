"""Parse pgbench's aggregated transaction logs (``-l --aggregate-interval=N``).

pgbench writes one file per thread (``prefix.PID`` and ``prefix.PID.K`` for thread K>0),
one line per interval, fields separated by single spaces, times in microseconds.

PostgreSQL 14 (6, 10 or 11 fields)::

    interval_start num_transactions sum_latency sum_latency_2 min_latency max_latency
        [sum_lag sum_lag_2 min_lag max_lag [skipped]]     # lag with -R, skipped with -R -L

``num_transactions`` counts skipped transactions too; latencies are over the others.

PostgreSQL 15 to 18 (always 15 fields; a field that does not apply is written as 0)::

    interval_start num_transactions sum_latency sum_latency_2 min_latency max_latency
        sum_lag sum_lag_2 min_lag max_lag skipped retried retries
        serialization_failures deadlock_failures

``num_transactions`` counts successful transactions only. There is no column with the total
number of failures: the two failure columns are filled only under ``--failures-detailed`` (and
``retried``/``retries`` only when ``--max-tries`` is not 1), so :attr:`AggregateInterval.failures`
is their sum and is 0 when pgbench ran without ``--failures-detailed``. A 16th field
(``other_sql_failures``, written by pgbench versions newer than 18) is added to ``failures``.

pgbench writes neither the interval that was still open when the run ended nor, therefore,
the transactions in it: the logs of a ``-T 3`` run hold fewer transactions than its summary.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from pgdyno.errors import ParseError

__all__ = [
    "AggregateInterval",
    "Second",
    "merge_intervals",
    "parse_aggregate_line",
    "parse_aggregate_log",
    "per_second",
]


@dataclass(frozen=True, slots=True)
class AggregateInterval:
    """One line of an aggregated log. Latencies and lags are in microseconds."""

    interval_start: int  # unix epoch seconds
    transactions: int
    sum_latency_us: float
    sum_latency_sq_us: float
    min_latency_us: float
    max_latency_us: float
    sum_lag_us: float | None  # 14: only under -R; 15+: always (0 without -R)
    sum_lag_sq_us: float | None
    min_lag_us: float | None
    max_lag_us: float | None
    skipped: int | None  # 14: only under -R -L; 15+: always
    retried: int | None  # None on 14
    retries: int | None
    failures: int | None
    serialization_failures: int | None
    deadlock_failures: int | None

    @property
    def completed(self) -> int:
        """Transactions whose latency is in the sums: 14 counts skipped ones as transactions."""
        if self.retried is None and self.skipped is not None:
            return self.transactions - self.skipped
        return self.transactions


_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_FIELD_COUNTS = (6, 10, 11, 15, 16)


def _int(token: str, name: str, line: str) -> int:
    if not _INT.fullmatch(token):
        raise ParseError(f"Aggregate log field {name} is not a whole number in {line.strip()!r}.")
    return int(token)


def _float(token: str, name: str, line: str) -> float:
    if not _FLOAT.fullmatch(token):
        raise ParseError(f"Aggregate log field {name} is not a number in {line.strip()!r}.")
    return float(token)


def parse_aggregate_line(line: str) -> AggregateInterval:
    """Read one aggregated-log line of PostgreSQL 14 to 18.

    >>> parse_aggregate_line("1700000000 5 5000 5000000 900 1100").transactions
    5
    """
    tokens = line.split()
    if len(tokens) not in _FIELD_COUNTS:
        raise ParseError(
            f"Aggregate log line has {len(tokens)} fields, not one of "
            f"{', '.join(map(str, _FIELD_COUNTS))}: {line.strip()!r}."
        )
    n = len(tokens)
    lag = [_float(t, f"{i + 7}", line) for i, t in enumerate(tokens[6:10])] if n >= 10 else None
    skipped = _int(tokens[10], "11", line) if n >= 11 else None
    tail = [_int(t, f"{i + 12}", line) for i, t in enumerate(tokens[11:])] if n >= 15 else None
    transactions = _int(tokens[1], "2", line)
    if tail is None and skipped is not None and skipped > transactions:
        raise ParseError(
            f"Aggregate log line skips more transactions than it has: {line.strip()!r}."
        )
    return AggregateInterval(
        interval_start=_int(tokens[0], "1", line),
        transactions=transactions,
        sum_latency_us=_float(tokens[2], "3", line),
        sum_latency_sq_us=_float(tokens[3], "4", line),
        min_latency_us=_float(tokens[4], "5", line),
        max_latency_us=_float(tokens[5], "6", line),
        sum_lag_us=None if lag is None else lag[0],
        sum_lag_sq_us=None if lag is None else lag[1],
        min_lag_us=None if lag is None else lag[2],
        max_lag_us=None if lag is None else lag[3],
        skipped=skipped,
        retried=None if tail is None else tail[0],
        retries=None if tail is None else tail[1],
        failures=None if tail is None else sum(tail[2:]),
        serialization_failures=None if tail is None else tail[2],
        deadlock_failures=None if tail is None else tail[3],
    )


def parse_aggregate_log(lines: Iterable[str]) -> Iterator[AggregateInterval]:
    """Read an aggregated log, one interval per non-blank line.

    >>> [i.interval_start for i in parse_aggregate_log(["1 1 1 1 1 1\\n", "\\n", "2 0 0 0 0 0"])]
    [1, 2]
    """
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield parse_aggregate_line(line)
        except ParseError as e:
            raise ParseError(f"Aggregate log line {line_no}: {e}") from None


def _add(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else a + b


def _add_int(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


def _extreme(
    a: float | None, b: float | None, pick: Callable[[float, float], float]
) -> float | None:
    if a is None:
        return b
    return a if b is None else pick(a, b)


def _merge_two(a: AggregateInterval, b: AggregateInterval) -> AggregateInterval:
    # An interval without completed transactions has 0 as min and max: not a measurement.
    if b.completed == 0:
        a, b = b, a
    if a.completed == 0:
        min_lat, max_lat = b.min_latency_us, b.max_latency_us
        min_lag, max_lag = b.min_lag_us, b.max_lag_us
    else:
        min_lat = min(a.min_latency_us, b.min_latency_us)
        max_lat = max(a.max_latency_us, b.max_latency_us)
        min_lag = _extreme(a.min_lag_us, b.min_lag_us, min)
        max_lag = _extreme(a.max_lag_us, b.max_lag_us, max)
    return AggregateInterval(
        interval_start=a.interval_start,
        transactions=a.transactions + b.transactions,
        sum_latency_us=a.sum_latency_us + b.sum_latency_us,
        sum_latency_sq_us=a.sum_latency_sq_us + b.sum_latency_sq_us,
        min_latency_us=min_lat,
        max_latency_us=max_lat,
        sum_lag_us=_add(a.sum_lag_us, b.sum_lag_us),
        sum_lag_sq_us=_add(a.sum_lag_sq_us, b.sum_lag_sq_us),
        min_lag_us=min_lag,
        max_lag_us=max_lag,
        skipped=_add_int(a.skipped, b.skipped),
        retried=_add_int(a.retried, b.retried),
        retries=_add_int(a.retries, b.retries),
        failures=_add_int(a.failures, b.failures),
        serialization_failures=_add_int(a.serialization_failures, b.serialization_failures),
        deadlock_failures=_add_int(a.deadlock_failures, b.deadlock_failures),
    )


def merge_intervals(streams: Iterable[Iterable[AggregateInterval]]) -> list[AggregateInterval]:
    """Combine the logs of several threads into one interval per start time, in time order.

    Counts and sums add up, minimums take the least and maximums the greatest (an interval
    with no completed transaction does not count for those: pgbench writes 0 there).
    """
    by_start: dict[int, AggregateInterval] = {}
    for stream in streams:
        for interval in stream:
            seen = by_start.get(interval.interval_start)
            by_start[interval.interval_start] = (
                interval if seen is None else _merge_two(seen, interval)
            )
    return [by_start[start] for start in sorted(by_start)]


@dataclass(frozen=True, slots=True)
class Second:
    """Rates and latencies of one interval (one second with ``--aggregate-interval=1``)."""

    t: int  # interval start, unix epoch seconds
    tps: float  # completed transactions per second
    latency_avg_ms: float | None  # None when no transaction completed
    latency_stddev_ms: float | None
    latency_min_ms: float | None
    latency_max_ms: float | None
    failures: int
    lag_avg_ms: float | None  # None when the log has no lag columns (14 without -R)
    skipped: int


def per_second(intervals: Sequence[AggregateInterval], interval_s: int = 1) -> list[Second]:
    """Derive rates and millisecond latencies, one :class:`Second` per interval start.

    Intervals sharing a start (several threads' logs) are merged first. The population
    standard deviation is used, as pgbench does.

    >>> line = parse_aggregate_line("1700000000 4 4000 4000000 1000 1000")
    >>> per_second([line])[0].latency_avg_ms, per_second([line], 2)[0].tps
    (1.0, 2.0)
    """
    if interval_s <= 0:
        raise ValueError(f"interval_s must be positive, not {interval_s}")
    seconds = []
    for i in merge_intervals([intervals]):
        n = i.completed
        if n > 0:
            mean = i.sum_latency_us / n
            variance = max(0.0, i.sum_latency_sq_us / n - mean * mean)
            avg: float | None = mean / 1000.0
            stddev: float | None = math.sqrt(variance) / 1000.0
            low: float | None = i.min_latency_us / 1000.0
            high: float | None = i.max_latency_us / 1000.0
        else:
            avg = stddev = low = high = None
        seconds.append(
            Second(
                t=i.interval_start,
                tps=n / interval_s,
                latency_avg_ms=avg,
                latency_stddev_ms=stddev,
                latency_min_ms=low,
                latency_max_ms=high,
                failures=i.failures or 0,
                lag_avg_ms=None if i.sum_lag_us is None or n == 0 else i.sum_lag_us / n / 1000.0,
                skipped=i.skipped or 0,
            )
        )
    return seconds
