"""Per-script figures of the per-transaction log (``by_script``, ``script_counts``) against real
pgbench runs of four weighted scripts with --max-tries 10 --failures-detailed (15, 18) and
without (14), counted again here with a plain line split, and against pgbench's own summary.

The recordings and how they were made: tests/data/pgbench/README.md ("Several scripts").
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgdyno.pgbench.txlog as txlog
from pgdyno.errors import ParseError
from pgdyno.pgbench.output import parse_summary
from pgdyno.pgbench.txlog import summarize
from pgdyno.records import ScriptLatency

DATA = Path(__file__).parent.parent / "data" / "pgbench"
RETRYING = (15, 18)  # --max-tries 10: a retries field
VERSIONS = (14, *RETRYING)
QS = {"p50_ms": 0.5, "p90_ms": 0.9, "p99_ms": 0.99, "p999_ms": 0.999}
T0 = 1795694768  # pg18/scripts.tx.1.log has "2 33 serialization 3 1795694768 859925 9"


def logs(version: int) -> list[Path]:
    return [DATA / f"pg{version}" / f"scripts.tx.{k}.log" for k in (0, 1)]


def read(
    version: int, **options: object
) -> tuple[list[txlog.LatencySummary], txlog.LatencySummary]:
    return summarize(logs(version), with_retries=version in RETRYING, **options)  # type: ignore[arg-type]


@dataclass
class Plain:
    """The test's own count of one script's lines."""

    latencies: list[int] = field(default_factory=list)
    words: Counter[str] = field(default_factory=Counter)
    retried: int = 0
    retries: int = 0


def plain_count(paths: list[Path]) -> tuple[dict[int, Plain], dict[int, Counter[int]]]:
    """Per script number: latencies, failure words, retries; per second: successes by script."""
    scripts: dict[int, Plain] = defaultdict(Plain)
    seconds: dict[int, Counter[int]] = defaultdict(Counter)
    for path in paths:
        for line in path.read_text().splitlines():
            fields = line.split()
            script = scripts[int(fields[3])]
            if fields[2].isdigit():
                script.latencies.append(int(fields[2]))
                seconds[int(fields[4])][int(fields[3])] += 1
            else:
                script.words[fields[2]] += 1
            if len(fields) == 7 and int(fields[6]):
                script.retried += 1
                script.retries += int(fields[6])
    return scripts, seconds


def exact(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(Fraction(str(q)) * len(ordered))) - 1]


def assert_like_plain(got: ScriptLatency, want: Plain, with_retries: bool) -> None:
    assert got.transactions == len(want.latencies)
    assert got.failed == sum(want.words.values())
    assert got.serialization_failures == want.words["serialization"]
    assert got.deadlock_failures == want.words["deadlock"]
    assert got.skipped == 0 and got.other_failures == 0
    assert (got.retried, got.retries) == (
        (want.retried, want.retries) if with_retries else (None, None)
    )
    assert got.max_ms == max(want.latencies) / 1000 and got.min_ms == min(want.latencies) / 1000
    assert got.avg_ms == pytest.approx(sum(want.latencies) / len(want.latencies) / 1000)
    for name, q in QS.items():
        expected = exact(want.latencies, q) / 1000
        assert abs(getattr(got, name) - expected) <= 0.01 * expected, (got.script, name)


@pytest.mark.parametrize("version", VERSIONS)
def test_per_script_figures_agree_with_a_plain_count(version: int) -> None:
    rows, total = read(version)
    plain, _ = plain_count(logs(version))
    assert sorted(plain) == [0, 1, 2, 3] == [s.script for s in total.by_script]
    for got in total.by_script:
        assert_like_plain(got, plain[got.script], version in RETRYING)
    assert total.transactions == sum(s.transactions for s in total.by_script)
    assert total.failed == sum(s.failed for s in total.by_script)
    assert total.logged == 4000 and total.script_counts == tuple(
        s.transactions for s in total.by_script
    )
    assert all(row.by_script == () for row in rows)


def test_the_recordings_hold_retries_and_a_failure() -> None:
    # what the tests above rely on: not all zeros
    plain, _ = plain_count(logs(18))
    assert plain[3].words == Counter(serialization=1) and plain[3].retries > 100
    assert plain[2].retries > 0 and plain[0].retries == plain[1].retries == 0
    assert plain_count(logs(15))[0][3].retries > 100


@pytest.mark.parametrize("version", VERSIONS)
def test_per_script_figures_agree_with_pgbench_own_summary(version: int) -> None:
    summary = parse_summary((DATA / f"pg{version}" / "scripts.stdout").read_text())
    _, total = read(version)
    assert [s.name for s in summary.scripts][3] == "hot_row.sql"
    for theirs, ours in zip(summary.scripts, total.by_script, strict=True):
        assert theirs.index == ours.script
        assert theirs.transactions == ours.transactions  # successful ones
        if version in RETRYING:
            assert theirs.failed_transactions == ours.failed
            assert theirs.serialization_failures == ours.serialization_failures
            assert theirs.deadlock_failures == ours.deadlock_failures
            assert theirs.retried_transactions == ours.retried
            assert theirs.retries == ours.retries
        else:
            assert theirs.retries is None and ours.retries is None
        assert theirs.latency_avg_ms is not None and ours.avg_ms is not None
    assert summary.transactions == total.transactions
    assert summary.failed_transactions == total.failed
    if version in RETRYING:
        assert summary.retried_transactions == sum(s.retried or 0 for s in total.by_script)
        assert summary.retries == sum(s.retries or 0 for s in total.by_script)


@pytest.mark.parametrize("version", VERSIONS)
def test_script_counts_per_second(version: int) -> None:
    rows, total = read(version)
    _, seconds = plain_count(logs(version))
    assert [r.t for r in rows] == list(range(min(seconds), max(seconds) + 1))
    for row in rows:
        assert row.script_counts == tuple(seconds[row.t or 0][k] for k in range(4))
        assert sum(row.script_counts) == row.transactions
    assert tuple(map(sum, zip(*(r.script_counts for r in rows), strict=True))) == (
        total.script_counts
    )


@pytest.mark.parametrize("version", RETRYING)
def test_a_7th_field_is_retries_only_when_told(version: int) -> None:
    rows, total = read(version)
    assert total.lag_avg_ms is None and all(r.lag_avg_ms is None for r in rows)
    # Without with_retries a 7-field line is taken for one of -R (schedule lag), the default
    # that keeps older callers as they were; with_lag=False says the same as with_retries.
    _, as_lag = summarize(logs(version))
    assert as_lag.lag_max_ms is not None and as_lag.by_script[3].retries is None
    _, no_lag = summarize(logs(version), with_lag=False)
    assert no_lag == total
    # -R with --max-tries writes 8 fields; a caller saying both still reads 7 as retries
    _, both = summarize(logs(version), with_lag=True, with_retries=True)
    assert both == total


def test_thread_files_and_chunks_do_not_change_anything() -> None:
    rows, total = read(18)
    assert summarize(logs(18)[::-1], with_retries=True) == (rows, total)
    saved = txlog._CHUNK_CHARS
    txlog._CHUNK_CHARS = 97  # a few lines a chunk: seconds and lines cross chunk boundaries
    try:
        assert read(18) == (rows, total)
    finally:
        txlog._CHUNK_CHARS = saved


def test_the_number_of_scripts_fixes_the_lengths_and_is_checked() -> None:
    rows, total = read(18, scripts=6)
    assert all(len(r.script_counts) == 6 and r.script_counts[4:] == (0, 0) for r in rows)
    assert [s.transactions for s in total.by_script[4:]] == [0, 0]
    assert total.by_script[5] == ScriptLatency(5, 0, 0, 0, 0, 0, 0, 0, 0, *[None] * 7)
    assert read(18, scripts=4) == read(18)
    with pytest.raises(ParseError, match=r"scripts.tx.0.log line \d+ is of script number 3"):
        read(18, scripts=3)
    with pytest.raises(ValueError, match="scripts"):
        read(18, scripts=0)


def test_a_single_script_log_has_no_script_counts() -> None:
    rows, total = summarize([DATA / "pg18" / "txlog.log"])
    assert all(r.script_counts == () for r in [*rows, total])
    (only,) = total.by_script
    assert (only.script, only.transactions, only.failed) == (0, total.transactions, 0)
    assert (only.p50_ms, only.p99_ms, only.max_ms) == (total.p50_ms, total.p99_ms, total.max_ms)
    assert only.retries is None


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_script_counts_grow_with_the_scripts_seen_unless_told(tmp_path: Path) -> None:
    log = write(
        tmp_path / "tx.1",
        [f"0 1 900 0 {T0} 1 0", f"0 2 800 1 {T0 + 2} 1 2", f"0 3 failed 2 {T0 + 2} 5 9"],
    )
    rows, total = summarize([log], with_retries=True)
    # the empty second comes before the line of script 1 is read
    assert [r.script_counts for r in rows] == [(), (), (0, 1, 0)]
    assert total.script_counts == (1, 1, 0) and total.by_script[2].failed == 1
    assert [s.retries for s in total.by_script] == [0, 2, 9]
    rows, _ = summarize([log], with_retries=True, scripts=3)
    assert [r.script_counts for r in rows] == [(1, 0, 0), (0, 0, 0), (0, 1, 0)]


def test_sampling_rate_scales_the_script_figures(tmp_path: Path) -> None:
    """Every other line of the recorded logs, read as a log sampled at 0.5: the numbers say
    each line stands for about 2 transactions, so each script's figures are about those of
    the full log (the split among scripts and outcomes is the kept lines')."""
    thinned = [write(tmp_path / p.name, p.read_text().splitlines()[1::2]) for p in logs(18)]
    rows, total = summarize(thinned, with_retries=True, sampling_rate=0.5)
    _, full = read(18)
    ended = sum(s.transactions + (s.failed or 0) for s in full.by_script)
    assert abs(sum(s.transactions + (s.failed or 0) for s in total.by_script) - ended) <= 4
    for half, whole in zip(total.by_script, full.by_script, strict=True):
        # the kept lines' split: within 3 standard deviations of a binomial half
        assert abs(half.transactions - whole.transactions) <= 3 * math.sqrt(whole.transactions)
    assert abs(sum(sum(r.script_counts) for r in rows) - full.transactions) < 0.05 * ended


@pytest.mark.parametrize("bad", ["failed1", "failedfailed", "1e3", "fail"])
def test_a_bad_time_in_a_chunk_with_failures_is_refused(bad: str, tmp_path: Path) -> None:
    lines = (DATA / "pg18" / "scripts.tx.1.log").read_text().splitlines()
    assert " serialization " in lines[118]  # so the first chunk has words
    fields = lines[120].split()
    fields[2] = bad
    lines[120] = " ".join(fields)
    path = write(tmp_path / "tx.1", lines)
    with pytest.raises(ParseError, match=f"{path} line 121: the time field '{bad}'"):
        summarize([path], with_retries=True)


# Random logs of up to 12 scripts (two-digit numbers are read line by line) with failures and
# retries, against the plain count above.
outcomes = st.one_of(
    st.integers(min_value=1, max_value=10**6).map(str),
    st.sampled_from(["skipped", "failed", "serialization", "deadlock"]),
)
lines_of_a_thread = st.lists(
    st.tuples(st.integers(0, 2), outcomes, st.integers(0, 11), st.integers(0, 3)), max_size=50
)


@settings(max_examples=60, deadline=None)
@given(st.lists(lines_of_a_thread, min_size=1, max_size=3), st.sampled_from([41, 1 << 17]))
def test_random_logs_against_a_plain_count(
    threads: list[list[tuple[int, str, int, int]]], chunk: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, steps in enumerate(threads):
            t, lines = T0, []
            for n, (step, time, script, retries) in enumerate(steps):
                t += step
                lines.append(f"{k} {n} {time} {script} {t} {n * 997 % 10**6} {retries}")
            paths.append(write(Path(tmp) / f"tx.{k}", lines))
        saved = txlog._CHUNK_CHARS
        txlog._CHUNK_CHARS = chunk
        try:
            rows, total = summarize(paths, with_retries=True)
        finally:
            txlog._CHUNK_CHARS = saved
        plain, seconds = plain_count(paths)
    assert [s.script for s in total.by_script] == list(range(max(plain, default=-1) + 1))
    for got in total.by_script:
        want = plain.get(got.script, Plain())
        assert (got.transactions, got.skipped) == (len(want.latencies), want.words["skipped"])
        assert got.failed == sum(want.words.values()) - want.words["skipped"]
        assert (got.retried, got.retries) == (want.retried, want.retries)
        assert got.max_ms == (max(want.latencies) / 1000 if want.latencies else None)
    for row in rows:  # each row covers the script numbers seen up to it, if more than 0
        counts = seconds.get(row.t or 0, Counter())
        if row.script_counts == ():
            assert counts[0] == row.transactions
        else:
            assert row.script_counts == tuple(counts[s] for s in range(len(row.script_counts)))
            assert sum(row.script_counts) == row.transactions
    assert len(total.script_counts) == (len(total.by_script) if len(total.by_script) > 1 else 0)
