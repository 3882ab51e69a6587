"""Latency percentiles from pgbench's per-transaction log (``-l`` without ``--aggregate-interval``).

pgbench writes one file per thread (``prefix.PID``, ``prefix.PID.1``, ...), one line per
transaction in the order the thread saw them complete, fields separated by single spaces::

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

``time`` is the latency in microseconds, or a word: ``skipped`` (``-R`` with ``-L``), ``failed``
(15+), or with ``--failures-detailed`` the kind of failure (``serialization``, ``deadlock``;
``other`` is accepted for newer versions). ``script_no`` is the 0-based number of the script
(``-f``/``-b`` options in order). ``time_epoch time_us`` is when the transaction completed.
``schedule_lag`` is written under ``-R``, ``retries`` (of that transaction, failed ones too)
when ``--max-tries`` is not 1. A 7-field line has one of the two: the caller says which run it
was (``with_retries=True`` for ``--max-tries`` other than 1 without ``-R``; without it a
7-field line is read as having ``schedule_lag``). With ``--sampling-rate R`` pgbench logs each
transaction, skipped or failed ones too, with probability R.

The thread files are merged by completion second with a k-way merge, so memory holds one
second's latencies, one histogram (:class:`~pgdyno.stats.histogram.LatencyHistogram`) per
script number for the second and one for the run, not the log. Lines are read in chunks and
split in bulk: the columns are checked and counted with string operations that run in C, and a
chunk that fails a check is read again line by line to name the line at fault
(`pgdyno.pgbench.txlog_lines`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

from pgdyno.errors import ParseError
from pgdyno.pgbench.txlog_lines import (
    FAILURE_WORDS,
    SKIPPED,
    FileReader,
    LogLine,
    Numbers,
    Part,
    parse_line,
)
from pgdyno.records import ScriptLatency
from pgdyno.stats.histogram import LatencyHistogram

__all__ = [
    "FAILURE_WORDS",
    "SKIPPED",
    "LatencySummary",
    "LogLine",
    "ScriptLatency",
    "iter_summaries",
    "parse_line",
    "summarize",
]

_QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
_CHUNK_CHARS = 1 << 17  # read size; a chunk's tokens take about 6x this in memory
_MAX_LINE_CHARS = 1 << 16
_MAX_GAP_S = 7 * 86400  # a longer silence between two lines is taken as a corrupt time stamp


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latencies of the transactions that completed in one second, or in the whole run.

    ``transactions``, ``failed`` and ``skipped`` are the logged counts times the transactions
    a line stands for. With ``--sampling-rate`` that is counted, not assumed: pgbench numbers
    each client's transactions, so two logged lines of a client tell exactly how many ended
    between them, and a second's total is exact but for the few transactions after each
    client's last logged line in it (they count in the next second). Only the split of that
    total into successful, failed and skipped is estimated from the sampled lines (before
    this, 1 / rate per line: at 2,000 lines a second a 4 s total was off by about 1.1%).
    ``logged`` is the number of lines read. Percentiles are
    over successful transactions and within 1% of the exact ones (see the histogram).
    ``script_counts`` are the successful transactions of each script number (estimates too),
    empty when the run has a single script; ``by_script`` is filled on the run's total only.
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
    script_counts: tuple[int, ...] = ()  # index: script number
    by_script: tuple[ScriptLatency, ...] = ()  # whole run only; index: script number
    p95_ms: float | None = None  # capacity curves' middle percentile (not stored per second)


def _read_parts(path: Path, reader: FileReader) -> Iterator[tuple[int, Part]]:
    """One thread's log as ``(second, part)`` in time order, reading a chunk at a time."""
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
    """Counts and lags of a second or of the run (the latencies go to histograms)."""

    __slots__ = ("ended", "failed", "lag_max", "lag_n", "lag_sum", "logged", "numbered", "skipped")

    def __init__(self) -> None:
        self.logged = self.failed = self.skipped = self.lag_sum = self.lag_n = 0
        self.ended = self.numbered = 0
        self.lag_max: int | None = None

    def scale(self, sampling_rate: float) -> float:
        """How many transactions one logged line stands for: exactly, from the transaction
        numbers, when the log is sampled and its lines were numbered; else 1 / the rate."""
        if sampling_rate < 1.0 and self.numbered:
            return self.ended / self.numbered
        return 1.0 / sampling_rate

    def add(self, other: _Tally | Part) -> None:
        """Add a second's tally, or a part's lines and lags (its failures are counted apart)."""
        self.logged += other.logged
        self.ended += other.ended
        self.numbered += other.numbered
        self.lag_sum += other.lag_sum
        self.lag_n += other.lag_n
        top = other.lag_max
        if top is not None and (self.lag_max is None or top > self.lag_max):
            self.lag_max = top
        if isinstance(other, _Tally):
            self.failed += other.failed
            self.skipped += other.skipped


class _Script:
    """One script number over the run: its latencies, failures by word, skips and retries."""

    __slots__ = ("failures", "histogram", "retried", "retries", "skipped")

    def __init__(self) -> None:
        self.histogram = LatencyHistogram()
        self.failures: Counter[str] = Counter()
        self.skipped = self.retried = self.retries = 0

    def record(self, script: int, scale: float, with_retries: bool) -> ScriptLatency:
        h, f = self.histogram, self.failures
        p50, p90, _p95, p99, p999 = h.quantiles(_QUANTILES)
        return ScriptLatency(
            script=script,
            transactions=_estimate(h.count, scale),
            failed=_estimate(f.total(), scale),
            serialization_failures=_estimate(f["serialization"], scale),
            deadlock_failures=_estimate(f["deadlock"], scale),
            other_failures=_estimate(f["other"], scale),
            skipped=_estimate(self.skipped, scale),
            retried=_estimate(self.retried, scale) if with_retries else None,
            retries=_estimate(self.retries, scale) if with_retries else None,
            p50_ms=_ms(p50),
            p90_ms=_ms(p90),
            p99_ms=_ms(p99),
            p999_ms=_ms(p999),
            max_ms=_ms(h.max),
            avg_ms=_ms(h.mean),
            min_ms=_ms(h.min),
        )


def _estimate(logged: int, scale: float) -> int:
    """The transactions `logged` lines stand for (`scale` each)."""
    return logged if scale == 1.0 else round(logged * scale)


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _summary(
    t: int | None,
    histogram: LatencyHistogram,
    tally: _Tally,
    sampling_rate: float,
    script_counts: tuple[int, ...] = (),
    by_script: tuple[ScriptLatency, ...] = (),
) -> LatencySummary:
    p50, p90, p95, p99, p999 = histogram.quantiles(_QUANTILES)
    scale = tally.scale(sampling_rate)
    return LatencySummary(
        t=t,
        transactions=_estimate(histogram.count, scale),
        logged=tally.logged,
        p50_ms=_ms(p50),
        p90_ms=_ms(p90),
        p99_ms=_ms(p99),
        p999_ms=_ms(p999),
        max_ms=_ms(histogram.max),
        failed=_estimate(tally.failed, scale),
        skipped=_estimate(tally.skipped, scale),
        lag_avg_ms=tally.lag_sum / tally.lag_n / 1000.0 if tally.lag_n else None,
        lag_max_ms=_ms(tally.lag_max),
        p95_ms=_ms(p95),
        avg_ms=_ms(histogram.mean),
        min_ms=_ms(histogram.min),
        stddev_ms=_ms(histogram.stddev) if t is None else None,
        script_counts=script_counts,
        by_script=by_script,
    )


class _Run:
    """What has been read of a run: the current second's histograms (one per script number,
    reused) and tally, and the run's per-script figures."""

    def __init__(self, sampling_rate: float, scripts: int | None) -> None:
        self.rate = sampling_rate
        self.scripts = scripts
        self.top = 0  # the highest script number seen so far
        self.with_retries = False  # whether the log has a retries column
        self.hists: dict[int, LatencyHistogram] = {}
        self.combined = LatencyHistogram()  # the second's, when it has several scripts
        self.second, self.run = _Tally(), _Tally()
        self.by_script: dict[int, _Script] = {}

    def _script(self, script: int) -> tuple[LatencyHistogram, _Script]:
        if script not in self.by_script:
            self.by_script[script] = _Script()
            self.hists[script] = LatencyHistogram()
            self.top = max(self.top, script)
        return self.hists[script], self.by_script[script]

    def add(self, part: Part) -> None:
        for script, tokens in part.scripts.items():
            histogram, figures = self._script(script)
            skipped = tokens.pop(SKIPPED, 0)
            figures.skipped += skipped
            self.second.skipped += skipped
            for word in FAILURE_WORDS:
                if failed := tokens.pop(word, 0):
                    figures.failures[word] += failed
                    self.second.failed += failed
            histogram.record_counts(_latencies(tokens))
        self.second.add(part)
        if part.retries is not None and part.retried is not None:
            self.with_retries = True
            for script, retries in part.retries.items():
                self.by_script[script].retries += retries
                self.by_script[script].retried += part.retried[script]

    def _counts_length(self) -> int:
        """How many scripts a row's ``script_counts`` has: 0 for a single script."""
        n = self.scripts if self.scripts is not None else self.top + 1
        return n if n > 1 else 0

    def end_second(self, t: int) -> LatencySummary:
        """The second's summary; its figures are added to the run's and forgotten."""
        used = [h for h in self.hists.values() if h.count]
        combined = used[0] if len(used) == 1 else self.combined
        if len(used) != 1:
            combined.reset()
            for histogram in used:
                combined.merge(histogram)
        scale = self.second.scale(self.rate)
        counts = tuple(
            _estimate(self.hists[s].count if s in self.hists else 0, scale)
            for s in range(self._counts_length())
        )
        summary = _summary(t, combined, self.second, self.rate, counts)
        for script, histogram in self.hists.items():
            if histogram.count:
                self.by_script[script].histogram.merge(histogram)
                histogram.reset()
        self.run.add(self.second)
        self.second = _Tally()
        return summary

    def empty(self, t: int) -> LatencySummary:
        counts = (0,) * self._counts_length()
        return LatencySummary(
            t, 0, 0, None, None, None, None, None, 0, 0, None, None, script_counts=counts
        )

    def total(self) -> LatencySummary:
        n = self.scripts if self.scripts is not None else (self.top + 1 if self.by_script else 0)
        figures = [self.by_script.get(s) or _Script() for s in range(n)]
        histograms = [f.histogram for f in figures if f.histogram.count]
        histogram = histograms[0] if len(histograms) == 1 else LatencyHistogram()
        if len(histograms) != 1:
            for h in histograms:
                histogram.merge(h)
        scale = self.run.scale(self.rate)
        by_script = tuple(f.record(s, scale, self.with_retries) for s, f in enumerate(figures))
        counts = tuple(s.transactions for s in by_script) if n > 1 else ()
        return _summary(None, histogram, self.run, self.rate, counts, by_script)


def _latencies(tokens: Counter[str]) -> dict[int, int]:
    """Latency tokens (digits only) as numbers with their counts."""
    values = dict(zip(map(int, tokens), tokens.values(), strict=True))
    if len(values) != len(tokens):  # "7" and "07": the same latency twice
        values = {}
        for token, count in tokens.items():
            values[int(token)] = values.get(int(token), 0) + count
    return values


def iter_summaries(
    paths: Sequence[Path],
    sampling_rate: float = 1.0,
    *,
    with_lag: bool = True,
    with_retries: bool = False,
    scripts: int | None = None,
    numbers_before: Mapping[int, int] | None = None,
) -> Iterator[LatencySummary]:
    """Yield one :class:`LatencySummary` per second, then the run's (whose ``t`` is None).

    Seconds run from the first to the last logged completion, empty ones included (with
    ``transactions=0`` and no latencies); the first and last are usually partial. Lazy: the
    files are read as the iterator advances, so rows can be stored as they come.
    ``with_lag`` and ``with_retries`` say what a 7-field line holds (see the module docstring).
    ``scripts`` is the number of scripts the run had: it fixes the length of ``script_counts``
    and ``by_script`` and makes a higher script number an error; without it they cover the
    script numbers seen so far, so an early row can be shorter than a later one.
    ``numbers_before``: when the files are a slice of a run's log, each client's last
    transaction number before it (for a sampled log's exact counts); None for a whole run.
    Raises :class:`~pgdyno.errors.ParseError` naming the file and line of a malformed line.
    """
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], not {sampling_rate!r}")
    if scripts is not None and scripts < 1:
        raise ValueError(f"scripts must be at least 1, not {scripts!r}")
    numbers = (
        Numbers(None if numbers_before is None else dict(numbers_before))
        if sampling_rate < 1.0
        else None
    )
    readers = [FileReader(Path(p), with_lag, with_retries, scripts, numbers) for p in paths]
    return _summaries(readers, _Run(sampling_rate, scripts))


def _summaries(readers: list[FileReader], run: _Run) -> Iterator[LatencySummary]:
    streams = [_read_parts(r.path, r) for r in readers]
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
                yield run.end_second(current)
                for gap in range(current + 1, t):
                    yield run.empty(gap)
            current = t
        run.add(part)
    if current is not None:
        yield run.end_second(current)
    yield run.total()


def summarize(
    paths: Sequence[Path],
    sampling_rate: float = 1.0,
    *,
    with_lag: bool = True,
    with_retries: bool = False,
    scripts: int | None = None,
    numbers_before: Mapping[int, int] | None = None,
) -> tuple[list[LatencySummary], LatencySummary]:
    """Per-second latency rows and the run's total from pgbench's per-transaction logs.

    ``paths`` are the files of every thread of one run; ``sampling_rate`` is pgbench's
    ``--sampling-rate``; ``with_lag`` (``-R``), ``with_retries`` (``--max-tries`` other than
    1), ``scripts`` and ``numbers_before`` are explained in :func:`iter_summaries`. The
    total's ``by_script`` has one :class:`~pgdyno.records.ScriptLatency` per script number.
    """
    *rows, total = iter_summaries(
        paths,
        sampling_rate,
        with_lag=with_lag,
        with_retries=with_retries,
        scripts=scripts,
        numbers_before=numbers_before,
    )
    return rows, total
