"""Per-transaction log summaries against real pgbench logs of PostgreSQL 14 to 18, plus
crafted logs for what the recordings lack (-R, -L, failures, sampling) and properties.

The recordings and how they were made: tests/data/pgbench/README.md.
"""

from __future__ import annotations

import math
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgdyno.pgbench.txlog as txlog
from pgdyno.errors import ParseError
from pgdyno.pgbench.output import parse_summary
from pgdyno.pgbench.txlog import LatencySummary, iter_summaries, parse_line, summarize

DATA = Path(__file__).parent.parent / "data" / "pgbench"
VERSIONS = (14, 15, 16, 17, 18)
versions = pytest.mark.parametrize("version", VERSIONS)
QS = {"p50_ms": 0.5, "p90_ms": 0.9, "p95_ms": 0.95, "p99_ms": 0.99, "p999_ms": 0.999}

# The shape of a real line (pg14/txlog.log, line 1: "1 1 2178 0 1795265183 806013"); the
# optional fields and the words follow the pgbench documentation of 14 to 18.
T0 = 1795265183


def recorded(version: int) -> Path:
    return DATA / f"pg{version}" / "txlog.log"


def exact(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(Fraction(str(q)) * len(ordered))) - 1]


def latencies_by_second(path: Path) -> dict[int, list[int]]:
    """The test's own reading of a log: latencies of successful transactions per second."""
    out: dict[int, list[int]] = defaultdict(list)
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[2].isdigit():
            out[int(fields[4])].append(int(fields[2]))
    return out


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


@contextmanager
def chunk_chars(n: int) -> Iterator[None]:
    """Read logs in chunks of n characters, to cross chunk boundaries in small files."""
    saved = txlog._CHUNK_CHARS
    txlog._CHUNK_CHARS = n
    try:
        yield
    finally:
        txlog._CHUNK_CHARS = saved


def assert_ordered(row: LatencySummary) -> None:
    values = [row.p50_ms, row.p90_ms, row.p99_ms, row.p999_ms, row.max_ms]
    if row.transactions == 0:
        assert values == [None] * 5
    else:
        assert None not in values
        assert values == sorted(values)  # type: ignore[type-var]


@versions
def test_per_second_counts_add_up_to_the_line_count(version: int) -> None:
    path = recorded(version)
    lines = path.read_text().splitlines()
    rows, total = summarize([path])
    assert sum(r.logged for r in rows) == len(lines) == total.logged == 200
    assert sum(r.transactions for r in rows) == total.transactions == 200
    assert total.failed == total.skipped == 0 and total.t is None
    seconds = sorted({int(line.split()[4]) for line in lines})
    assert [r.t for r in rows] == list(range(seconds[0], seconds[-1] + 1))
    assert all(r.lag_avg_ms is None and r.lag_max_ms is None for r in [*rows, total])


@versions
def test_percentiles_agree_with_exact_ones(version: int) -> None:
    path = recorded(version)
    by_second = latencies_by_second(path)
    rows, total = summarize([path])
    everything = [v for values in by_second.values() for v in values]
    for row, values in [(total, everything)] + [(r, by_second[r.t or 0]) for r in rows]:
        for name, q in QS.items():
            want = exact(values, q) / 1000
            got = getattr(row, name)
            assert abs(got - want) <= 0.01 * want, (row.t, name, got, want)
        assert row.max_ms == max(values) / 1000  # exact


@versions
def test_percentiles_are_in_order(version: int) -> None:
    rows, total = summarize([recorded(version)])
    for row in [*rows, total]:
        assert_ordered(row)


@versions
def test_thread_files_merge_like_one_file(version: int, tmp_path: Path) -> None:
    path = recorded(version)
    by_client: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text().splitlines():
        by_client[line.split()[0]].append(line)
    assert len(by_client) == 2  # -c 2
    threads = [write(tmp_path / f"tx.{i}", lines) for i, lines in enumerate(by_client.values())]
    assert summarize(threads) == summarize([path])
    assert summarize(threads[::-1]) == summarize([path])
    with chunk_chars(100):  # a few lines per chunk: seconds and lines cross chunk boundaries
        assert summarize(threads) == summarize([path])


def test_iter_summaries_streams_seconds_then_the_total() -> None:
    *rows, total = iter_summaries([recorded(15)])
    assert [r.t for r in rows] == [1795265198, 1795265199] and total.t is None
    assert (rows, total) == summarize([recorded(15)])


def test_skipped_transactions_are_counted_not_measured(tmp_path: Path) -> None:
    # -R 100 -L 5: a schedule_lag field, and "skipped" for transactions too late to start.
    log = write(
        tmp_path / "tx.1",
        [
            f"0 81 4621 0 {T0} 912698 3005",
            f"0 82 6173 0 {T0} 914578 4304",
            f"0 83 skipped 0 {T0} 914578 5217",
            f"0 83 skipped 0 {T0} 914578 9099",
            f"0 83 4722 0 {T0 + 1} 916203 3108",
        ],
    )
    rows, total = summarize([log])
    first, second = rows
    assert (first.t, first.logged, first.transactions, first.skipped) == (T0, 4, 2, 2)
    assert (first.p50_ms, first.max_ms) == (4.621, 6.173)
    assert first.lag_avg_ms == pytest.approx((3005 + 4304) / 2 / 1000)
    assert first.lag_max_ms == 4.304  # the skipped ones' lag is not a transaction's
    assert (second.transactions, second.skipped, second.lag_avg_ms) == (1, 0, 3.108)
    assert (total.logged, total.transactions, total.skipped, total.failed) == (5, 3, 2, 0)
    assert (total.max_ms, total.lag_max_ms) == (6.173, 4.304)  # exact
    assert total.p50_ms == pytest.approx(4.722, rel=1 / 256)  # a bucket's value


def test_failed_transactions_are_counted_not_measured(tmp_path: Path) -> None:
    # 15+ with --max-tries 10 (a retries field, no -R); with --failures-detailed the word is
    # the kind of failure.
    lines = [
        f"3 0 47423 0 {T0} 34501 3",
        f"3 1 8333 0 {T0} 42848 0",
        f"0 0 failed 0 {T0} 84905 9",
        f"2 0 serialization 0 {T0} 86248 9",
        f"1 0 deadlock 0 {T0} 86249 9",
        f"3 4 8307 0 {T0} 92788 0",
    ]
    path = write(tmp_path / "tx.1", lines)
    rows, total = summarize([path], with_lag=False)
    assert len(rows) == 1 and rows[0].t == T0
    assert (total.logged, total.transactions, total.failed, total.skipped) == (6, 3, 3, 0)
    assert total.max_ms == 47.423 and total.p50_ms == pytest.approx(8.333, rel=1 / 256)
    assert total.lag_avg_ms is None  # the 7th field is retries here
    # By default a 7th field is read as schedule_lag (-R without --max-tries).
    _, as_lag = summarize([path])
    assert as_lag.lag_max_ms == 0.003 and as_lag.lag_avg_ms == pytest.approx(0.001)


def test_lag_and_retries_together(tmp_path: Path) -> None:
    # -R and --max-tries other than 1: 8 fields, schedule_lag then retries.
    lines = [
        f"0 5 1200 0 {T0} 100 250 0",
        f"0 6 failed 0 {T0} 200 9000 2",
        f"1 7 1800 0 {T0} 300 -0 1",  # %.0f of a lag a hair below zero
    ]
    _, total = summarize([write(tmp_path / "tx.1", lines)])
    assert (total.transactions, total.failed, total.logged) == (2, 1, 3)
    assert (total.lag_avg_ms, total.lag_max_ms) == (0.125, 0.25)


@versions
def test_a_full_log_read_as_sampled_counts_what_its_numbers_say(version: int) -> None:
    """Every line's number follows the last: each stands for one transaction, whatever rate
    the caller says (before, 1 / rate each: 2,000 here)."""
    rows, total = summarize([recorded(version)], sampling_rate=0.1)
    assert (total.transactions, total.logged) == (200, 200)
    assert all(r.transactions == r.logged for r in rows)
    assert summarize([recorded(version)])[1].p99_ms == total.p99_ms  # latencies unchanged


def sampled(version: int) -> list[Path]:
    return sorted((DATA / f"pg{version}").glob("sampled.tx.*.log"))


def numbered_by_second(paths: list[Path]) -> dict[int, int]:
    """The test's own count: per second, each client's last number in it minus its last
    number before (from 0)."""
    last: dict[int, int] = {}
    out: dict[int, int] = defaultdict(int)
    for path in paths:
        for text in path.read_text().splitlines():
            client, number, _, _, second, _ = map(int, text.split())
            out[second] += number - last.get(client, 0)
            last[client] = number
    return out


@versions
def test_a_sampled_log_counts_every_transaction_from_its_numbers(version: int) -> None:
    """A real log of one transaction in 100 (recorded): each second's count is exact from
    pgbench's per-client numbers, and the run's is the summary's processed count but for the
    transactions after each client's last logged line."""
    paths = sampled(version)
    rows, total = summarize(paths, sampling_rate=0.01)
    counted = numbered_by_second(paths)
    assert {r.t: r.transactions for r in rows if r.transactions} == dict(counted)
    assert total.transactions == sum(counted.values())
    processed = parse_summary((DATA / f"pg{version}" / "sampled.stdout").read_text()).transactions
    assert 0 <= processed - total.transactions < 2 * 500  # 2 clients, a line in 100 each
    assert total.logged < total.transactions / 50  # sampled: the lines are far fewer


@versions
def test_a_slice_of_a_sampled_log_counts_from_the_numbers_before_it(
    version: int, tmp_path: Path
) -> None:
    """A period's lines (a switched run's router files them apart): given each client's
    number before the slice, its seconds count as in the whole log; without, a client's first
    line in the slice is not counted and the rest are scaled by the numbered lines."""
    paths = sampled(version)
    cut = sorted(numbered_by_second(paths))[1]  # from the second second on
    before: dict[int, int] = {}
    sliced = []
    for path in paths:
        kept = []
        for text in path.read_text().splitlines():
            client, number, _, _, second, _ = map(int, text.split())
            if second < cut:
                before[client] = number
            else:
                kept.append(text)
        sliced.append(write(tmp_path / path.name, kept))
    whole = {r.t: r.transactions for r in summarize(paths, sampling_rate=0.01)[0]}
    rows, total = summarize(sliced, sampling_rate=0.01, numbers_before=before)
    assert {r.t: r.transactions for r in rows} == {t: n for t, n in whole.items() if t >= cut}
    _, unknown = summarize(sliced, sampling_rate=0.01, numbers_before={})
    assert abs(unknown.transactions - total.transactions) < 0.01 * total.transactions


def test_a_client_numbered_anew_is_not_counted_backwards(tmp_path: Path) -> None:
    """A number below the client's last in an earlier second (logs of two runs in one file):
    that line starts the client's count again instead of taking transactions away."""
    lines = [f"0 6 900 0 {T0} 1", f"0 12 900 0 {T0} 2", f"0 2 900 0 {T0 + 1} 3"]
    _, total = summarize([write(tmp_path / "tx.1", lines)], sampling_rate=0.5)
    assert total.transactions == 3 * 6  # the two numbered lines stood for 6 each


def test_sampling_rate_scales_failures_and_skips(tmp_path: Path) -> None:
    """The numbers say each line stands for 4 transactions: the split among successful,
    skipped and failed is the sampled lines'."""
    lines = [f"0 4 900 0 {T0} 1 5", f"0 8 skipped 0 {T0} 2 6", f"0 12 failed 0 {T0} 3 7"]
    _, total = summarize([write(tmp_path / "tx.1", lines)], sampling_rate=0.25)
    assert (total.transactions, total.skipped, total.failed, total.logged) == (4, 4, 4, 3)
    _, full = summarize([tmp_path / "tx.1"])  # read as a full log: one transaction a line
    assert (full.transactions, full.skipped, full.failed) == (1, 1, 1)
    with pytest.raises(ValueError):
        summarize([tmp_path / "tx.1"], sampling_rate=0)


def test_empty_seconds_are_rows_without_latencies(tmp_path: Path) -> None:
    log = write(tmp_path / "tx.1", [f"0 1 900 0 {T0} 5", f"0 2 1100 0 {T0 + 3} 5"])
    rows, total = summarize([log])
    assert [r.t for r in rows] == [T0, T0 + 1, T0 + 2, T0 + 3]
    assert [r.transactions for r in rows] == [1, 0, 0, 1]
    assert rows[1] == LatencySummary(T0 + 1, 0, 0, None, None, None, None, None, 0, 0, None, None)
    assert total.transactions == 2 and total.p50_ms == 0.9


def test_empty_log(tmp_path: Path) -> None:
    rows, total = summarize([write(tmp_path / "tx.1", [])])
    assert rows == [] and total.logged == total.transactions == 0 and total.p50_ms is None
    assert summarize([]) == ([], total)


def test_a_blank_line_is_read_slowly_but_the_same(tmp_path: Path) -> None:
    lines = recorded(16).read_text().splitlines()
    with_blank = write(tmp_path / "tx.1", [*lines[:50], "", *lines[50:]])
    assert summarize([with_blank]) == summarize([recorded(16)])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("0 57 abc 0 1795265183 912698", "time field 'abc'"),
        ("0 57 1234 0 1795265183", "5 fields"),
        ("0 57 1234 0 1795265183 912698 12 3 4", "9 fields"),
        ("0 57 1234 x 1795265183 912698", "script_no"),
        ("0 57 1234 0 1795265183 912698 77", "has 7 fields where the first line has 6"),
        ("0 57 1234 0 1795265180 912698", "before the line above it"),
        ("0 57 12\xe934 0 1795265183 912698", "time field"),
    ],
)
def test_malformed_line_names_file_and_line(bad: str, message: str, tmp_path: Path) -> None:
    lines = recorded(14).read_text().splitlines()
    lines[56] = bad
    path = write(tmp_path / "tx.1", lines) if bad.isascii() else tmp_path / "tx.1"
    if not bad.isascii():
        path.write_bytes("".join(f"{line}\n" for line in lines).encode("latin-1"))
    for size in (txlog._CHUNK_CHARS, 300):  # the bad line in the first or a later chunk
        with chunk_chars(size), pytest.raises(ParseError, match=message) as caught:
            summarize([recorded(15), path])
        assert f"{path} line 57" in str(caught.value)


def test_last_line_without_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "tx.1"
    path.write_text(recorded(17).read_text().rstrip("\n"))
    assert summarize([path]) == summarize([recorded(17)])


def test_a_corrupt_time_stamp_far_away_is_refused(tmp_path: Path) -> None:
    a = write(tmp_path / "tx.1", [f"0 1 900 0 {T0} 5"])
    b = write(tmp_path / "tx.2", [f"1 1 900 0 {T0 + 30 * 86400} 5"])
    with pytest.raises(ParseError, match="line 1 completed at"):
        summarize([a, b])


def test_parse_line() -> None:
    row = parse_line("1 1 2178 0 1795265183 806013\n")
    assert row == (1, 1, 2178, "ok", 0, 1795265183, 806013, None, None)
    assert parse_line("0 83 skipped 0 1412881037 914578 5217").outcome == "skipped"
    assert parse_line("0 0 serialization 0 1499414498 84905 9", with_lag=False).retries == 9
    with pytest.raises(ParseError, match="not a whole number"):
        parse_line("0 1 2 0 1795265183 -5")


# Random logs of several threads, read against the test's own straightforward count.
outcomes = st.one_of(
    st.integers(min_value=1, max_value=10**7).map(str),
    st.sampled_from(["skipped", "failed", "serialization"]),
)
thread_logs = st.lists(
    st.lists(st.tuples(st.integers(0, 2), outcomes, st.integers(0, 10**5)), max_size=60),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(thread_logs, st.sampled_from([37, 101, 1 << 17]))
def test_random_logs_against_a_plain_count(
    threads: list[list[tuple[int, str, int]]], chunk: int
) -> None:
    expected: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, steps in enumerate(threads):
            t, lines = T0, []
            for n, (step, time, lag) in enumerate(steps):
                t += step
                lines.append(f"{k} {n} {time} 0 {t} {n * 997 % 10**6} {lag}")
                kind = time if not time.isdigit() else "ok"
                expected[t][kind].append(int(time) if kind == "ok" else 0)
                if kind == "ok":
                    expected[t]["lag"].append(lag)
            paths.append(write(Path(tmp) / f"tx.{k}", lines))
        with chunk_chars(chunk):
            rows, total = summarize(paths)
    if not expected:
        assert rows == [] and total.logged == 0
        return
    assert [r.t for r in rows] == list(range(min(expected), max(expected) + 1))
    for row in rows:
        e = expected.get(row.t or 0, {})
        ok = e.get("ok", [])
        assert row.transactions == len(ok)
        assert row.skipped == len(e.get("skipped", []))
        assert row.failed == len(e.get("failed", [])) + len(e.get("serialization", []))
        assert row.logged == row.transactions + row.skipped + row.failed
        assert row.max_ms == (max(ok) / 1000 if ok else None)
        lags = e.get("lag", [])
        assert row.lag_max_ms == (max(lags) / 1000 if lags else None)
        if ok:
            assert row.lag_avg_ms == pytest.approx(sum(lags) / len(lags) / 1000)
            for name, q in QS.items():
                want = exact(ok, q) / 1000
                assert abs(getattr(row, name) - want) <= 0.01 * want
        assert_ordered(row)
    assert total.logged == sum(len(steps) for steps in threads)
    assert total.transactions == sum(r.transactions for r in rows)
