"""Aggregated-log parsing against real pgbench logs of PostgreSQL 14 to 18, plus properties.

The recordings and how they were made: tests/data/pgbench/README.md.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgdyno.errors import ParseError
from pgdyno.pgbench.logs import (
    AggregateInterval,
    merge_intervals,
    parse_aggregate_line,
    parse_aggregate_log,
    per_second,
)
from pgdyno.pgbench.output import parse_summary

DATA = Path(__file__).parent.parent / "data" / "pgbench"
VERSIONS = (14, 15, 16, 17, 18)
versions = pytest.mark.parametrize("version", VERSIONS)

# First line of tpcb_r.agg.0.log, copied by hand: the six fields every version writes.
TPCB_FIRST = {
    14: (1795265171, 401, 379465.0, 396144055.0, 456.0, 3488.0),
    15: (1795265186, 134, 201964.0, 7410736462.0, 517.0, 85347.0),
    16: (1795265203, 51, 39574.0, 38453054.0, 452.0, 2563.0),
    17: (1795265221, 708, 829220.0, 4858627862.0, 456.0, 62698.0),
    18: (1795265238, 537, 541626.0, 590242098.0, 446.0, 2379.0),
}
# tpcb_r.agg.*.log of both threads: (lines, transactions in all of them)
TPCB_TOTALS = {14: (6, 4229), 15: (6, 3574), 16: (6, 3302), 17: (6, 5248), 18: (6, 4569)}
# First line of rate.agg.0.log: lag fields (sum, sum of squares, min, max) and line count
RATE_FIRST_LAG = {
    14: ((10268.0, 1953608.0, 22.0, 576.0), 3),
    15: ((4440.0, 603872.0, 47.0, 280.0), 3),
    16: ((24203.0, 8284727.0, 11.0, 2204.0), 2),
    17: ((22852.0, 3533378.0, 19.0, 512.0), 3),
    18: ((12380.0, 2064078.0, 2.0, 475.0), 3),
}


def log(version: int, name: str) -> list[AggregateInterval]:
    with (DATA / f"pg{version}" / name).open() as f:
        return list(parse_aggregate_log(f))


def thread_logs(version: int, run: str) -> list[list[AggregateInterval]]:
    paths = sorted((DATA / f"pg{version}").glob(f"{run}.agg.*.log"))
    return [log(version, p.name) for p in paths]


@versions
def test_first_line_of_each_version(version: int) -> None:
    first = log(version, "tpcb_r.agg.0.log")[0]
    assert (
        first.interval_start,
        first.transactions,
        first.sum_latency_us,
        first.sum_latency_sq_us,
        first.min_latency_us,
        first.max_latency_us,
    ) == TPCB_FIRST[version]


@versions
def test_columns_present_per_version(version: int) -> None:
    for interval in log(version, "tpcb_r.agg.1.log"):
        if version == 14:  # 6 fields: no lag, skipped, retry or failure columns
            assert interval.sum_lag_us is None and interval.max_lag_us is None
            assert interval.skipped is None
            assert (interval.retried, interval.retries, interval.failures) == (None, None, None)
            assert interval.serialization_failures is None and interval.deadlock_failures is None
        else:  # 15 fields, zeros where an option was not given
            assert (interval.sum_lag_us, interval.sum_lag_sq_us) == (0.0, 0.0)
            assert (interval.min_lag_us, interval.max_lag_us) == (0.0, 0.0)
            assert (interval.skipped, interval.retried, interval.retries) == (0, 0, 0)
            assert interval.failures == 0
            assert (interval.serialization_failures, interval.deadlock_failures) == (0, 0)


@versions
def test_rate_log_has_lag_and_skipped(version: int) -> None:
    intervals = log(version, "rate.agg.0.log")
    lag, lines = RATE_FIRST_LAG[version]
    assert len(intervals) == lines
    first = intervals[0]
    assert (first.sum_lag_us, first.sum_lag_sq_us, first.min_lag_us, first.max_lag_us) == lag
    assert all(i.skipped == 0 for i in intervals)
    assert all(i.sum_lag_us is not None and i.sum_lag_us > 0 for i in intervals)
    assert all((i.failures is None) == (version == 14) for i in intervals)


@versions
def test_rate_log_agrees_with_summary(version: int) -> None:
    summary = parse_summary((DATA / f"pg{version}" / "rate.stdout").read_text())
    seconds = per_second(log(version, "rate.agg.0.log"))
    # The highest lag of the run fell in a logged interval in every recording.
    assert max(s.lag_avg_ms or 0.0 for s in seconds) <= (summary.rate_lag_max_ms or 0.0)
    max_lag_ms = max(i.max_lag_us or 0.0 for i in log(version, "rate.agg.0.log")) / 1000
    assert max_lag_ms == summary.rate_lag_max_ms
    # Only 18's run had a transaction above the 5 ms limit, and its log shows it.
    slow = any((s.latency_max_ms or 0.0) > 5.0 for s in seconds)
    assert slow == ((summary.late_transactions or 0) > 0)
    assert all(150 <= s.tps <= 250 for s in seconds[1:])  # -R 200


@versions
def test_merge_two_threads(version: int) -> None:
    streams = thread_logs(version, "tpcb_r")
    assert len(streams) == 2
    merged = merge_intervals(streams)
    lines, total = TPCB_TOTALS[version]
    assert sum(len(s) for s in streams) == lines
    assert sum(i.transactions for i in merged) == total
    assert [i.interval_start for i in merged] == sorted(
        {i.interval_start for s in streams for i in s}
    )
    for m in merged:
        parts = [i for s in streams for i in s if i.interval_start == m.interval_start]
        assert m.transactions == sum(p.transactions for p in parts)
        assert m.sum_latency_us == sum(p.sum_latency_us for p in parts)
        assert m.sum_latency_sq_us == sum(p.sum_latency_sq_us for p in parts)
        assert m.min_latency_us == min(p.min_latency_us for p in parts)
        assert m.max_latency_us == max(p.max_latency_us for p in parts)


@versions
def test_logs_miss_the_last_interval(version: int) -> None:
    """pgbench does not write the interval still open at the end of the run."""
    summary = parse_summary((DATA / f"pg{version}" / "tpcb_r.stdout").read_text())
    logged = sum(i.transactions for i in merge_intervals(thread_logs(version, "tpcb_r")))
    assert 0 < logged < summary.transactions


@versions
def test_per_second_of_recording(version: int) -> None:
    merged = merge_intervals(thread_logs(version, "tpcb_r"))
    seconds = per_second(merged)
    assert [s.t for s in seconds] == [i.interval_start for i in merged]
    for s, i in zip(seconds, merged, strict=True):
        assert s.tps == i.transactions
        assert s.latency_avg_ms == pytest.approx(i.sum_latency_us / i.transactions / 1000)
        assert s.latency_min_ms == i.min_latency_us / 1000
        assert s.latency_max_ms == i.max_latency_us / 1000
        assert s.latency_stddev_ms is not None and s.latency_stddev_ms > 0
        assert s.latency_min_ms <= (s.latency_avg_ms or 0) <= s.latency_max_ms
        assert (s.failures, s.skipped) == (0, 0)
        assert s.lag_avg_ms == (None if version == 14 else 0.0)


@versions
def test_transaction_log_recording(version: int) -> None:
    lines = (DATA / f"pg{version}" / "txlog.log").read_text().splitlines()
    assert len(lines) == 200
    # client_id transaction_no time script_no time_epoch time_us (no -R, --max-tries 1)
    assert all(len(line.split()) == 6 for line in lines)
    assert {line.split()[0] for line in lines} == {"0", "1"}  # -c 2


@pytest.mark.parametrize(
    "line",
    [
        "",
        "hello",
        "1795265171 401 379465 396144055 456",  # 5 fields
        "1795265171 401 379465 396144055 456 3488 7",  # 7 fields
        "1795265171 401 379465 396144055 456 x",
        "1795265171 4.5 379465 396144055 456 3488",  # fractional count
        "1795265171 -1 379465 396144055 456 3488",
        "1795265171 401 379465 396144055 456 1_000",  # Python would read these
        "1795265171 ٤٠١ 379465 396144055 456 3488",  # Arabic-Indic digits
        "1795265171 401 nan 396144055 456 3488",
        "1795265171 401 1e3 396144055 456 3488",
        "1 2 3 4 5 6 7 8 9 10 3",  # 14: more skipped than transactions
        "1 2 3 4 5 6 7 8 9 10 0 0 0 0 0.5",  # failure count not whole
    ],
)
def test_garbage_line_raises(line: str) -> None:
    with pytest.raises(ParseError):
        parse_aggregate_line(line)


def test_garbage_log_names_the_line() -> None:
    lines = ["1 1 1 1 1 1\n", "\n", "this is not a log line\n"]
    intervals = parse_aggregate_log(lines)
    assert next(intervals).interval_start == 1
    with pytest.raises(ParseError, match="line 3"):
        next(intervals)


def test_blank_lines_are_skipped() -> None:
    assert len(list(parse_aggregate_log(["", "  \n", "1 0 0 0 0 0\n", "\n"]))) == 1


def test_pg14_skipped_are_counted_in_transactions() -> None:
    # 14 with -R -L: 10 transactions of which 2 skipped; latencies are over the other 8
    line = "100 10 8000 8000000 1000 1000 800 80000 100 100 2"
    [second] = per_second([parse_aggregate_line(line)])
    assert (second.tps, second.latency_avg_ms, second.lag_avg_ms, second.skipped) == (
        8.0,
        1.0,
        0.1,
        2,
    )
    assert second.latency_stddev_ms == 0.0


def test_pg15_detailed_failures_add_up() -> None:
    i = parse_aggregate_line("100 10 8000 8000000 1000 1000 0 0 0 0 0 3 7 2 1")
    assert (i.retried, i.retries, i.serialization_failures, i.deadlock_failures) == (3, 7, 2, 1)
    assert i.failures == 3
    assert per_second([i])[0].failures == 3
    newer = parse_aggregate_line("100 10 8000 8000000 1000 1000 0 0 0 0 0 3 7 2 1 4")
    assert newer.failures == 7


def test_empty_interval_does_not_spoil_min_and_max() -> None:
    busy = parse_aggregate_line("100 2 3000 5000000 1000 2000 0 0 0 0 0 0 0 0 0")
    idle = parse_aggregate_line("100 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
    for streams in ([[busy], [idle]], [[idle], [busy]]):
        [m] = merge_intervals(streams)
        assert (m.transactions, m.min_latency_us, m.max_latency_us) == (2, 1000.0, 2000.0)
    [alone] = per_second([idle])
    assert alone.tps == 0.0
    assert alone.latency_avg_ms is None and alone.latency_min_ms is None
    assert alone.lag_avg_ms is None


def test_per_second_merges_duplicates_and_sorts() -> None:
    a = parse_aggregate_line("101 1 1000 1000000 1000 1000")
    b = parse_aggregate_line("100 1 1000 1000000 1000 1000")
    c = parse_aggregate_line("101 3 6000 14000000 1000 3000")
    seconds = per_second([a, b, c])
    assert [(s.t, s.tps) for s in seconds] == [(100, 1.0), (101, 4.0)]
    assert seconds[1].latency_avg_ms == 1.75
    with pytest.raises(ValueError, match="interval_s"):
        per_second([a], interval_s=0)


def test_longer_intervals_divide_by_their_length() -> None:
    [s] = per_second([parse_aggregate_line("100 50 50000 50000000 1000 1000")], interval_s=10)
    assert s.tps == 5.0


# --- round trip: an AggregateInterval written as pgbench would, read back ---------------------

LAYOUTS = ("14", "14-rate", "14-rate-limit", "15+")
_us = st.integers(min_value=0, max_value=10**15).map(float)
_count = st.integers(min_value=0, max_value=10**9)


@st.composite
def intervals(draw: st.DrawFn) -> tuple[str, AggregateInterval]:
    layout = draw(st.sampled_from(LAYOUTS))
    transactions = draw(_count)
    has_lag = layout != "14"
    has_skipped = layout in ("14-rate-limit", "15+")
    has_tail = layout == "15+"
    serialization, deadlock = draw(_count), draw(_count)
    interval = AggregateInterval(
        interval_start=draw(st.integers(min_value=0, max_value=2**40)),
        transactions=transactions,
        sum_latency_us=draw(_us),
        sum_latency_sq_us=draw(_us),
        min_latency_us=draw(_us),
        max_latency_us=draw(_us),
        sum_lag_us=draw(_us) if has_lag else None,
        sum_lag_sq_us=draw(_us) if has_lag else None,
        min_lag_us=draw(_us) if has_lag else None,
        max_lag_us=draw(_us) if has_lag else None,
        skipped=(
            draw(st.integers(0, transactions) if layout == "14-rate-limit" else _count)
            if has_skipped
            else None
        ),
        retried=draw(_count) if has_tail else None,
        retries=draw(_count) if has_tail else None,
        failures=serialization + deadlock if has_tail else None,
        serialization_failures=serialization if has_tail else None,
        deadlock_failures=deadlock if has_tail else None,
    )
    return layout, interval


def pgbench_format(layout: str, i: AggregateInterval) -> str:
    """Write a line the way pgbench's C code does (%.0f for sums, integers for counts)."""
    fields = [
        str(i.interval_start),
        str(i.transactions),
        *(f"{v:.0f}" for v in (i.sum_latency_us, i.sum_latency_sq_us)),
        *(f"{v:.0f}" for v in (i.min_latency_us, i.max_latency_us)),
    ]
    if layout != "14":
        lag = (i.sum_lag_us, i.sum_lag_sq_us, i.min_lag_us, i.max_lag_us)
        fields += [f"{v or 0.0:.0f}" for v in lag]
    if layout in ("14-rate-limit", "15+"):
        fields.append(str(i.skipped))
    if layout == "15+":
        tail = (i.retried, i.retries, i.serialization_failures, i.deadlock_failures)
        fields += [str(v) for v in tail]
    return " ".join(fields) + "\n"


@given(intervals())
def test_round_trip(case: tuple[str, AggregateInterval]) -> None:
    layout, interval = case
    line = pgbench_format(layout, interval)
    assert len(line.split()) == {"14": 6, "14-rate": 10, "14-rate-limit": 11, "15+": 15}[layout]
    assert parse_aggregate_line(line) == interval


@given(st.lists(intervals(), max_size=30), st.integers(min_value=1, max_value=4))
def test_merge_keeps_totals(cases: list[tuple[str, AggregateInterval]], n_streams: int) -> None:
    same_layout = [i for layout, i in cases if layout == "15+"]
    streams = [same_layout[k::n_streams] for k in range(n_streams)]
    merged = merge_intervals(streams)
    assert merged == merge_intervals([same_layout])  # how it is split does not matter
    assert sum(m.transactions for m in merged) == sum(i.transactions for i in same_layout)
    assert sum(m.failures or 0 for m in merged) == sum(i.failures or 0 for i in same_layout)
    assert len(merged) == len({i.interval_start for i in same_layout})
    for s in per_second(merged):
        assert s.latency_stddev_ms is None or not math.isnan(s.latency_stddev_ms)
