"""pgbench -P 1 progress lines, recorded from real pgbench (tests/data/pgbench/README.md)."""

from pathlib import Path

import pytest

from pgdyno.pgbench.progress import parse_progress

DATA = Path(__file__).parent.parent / "data" / "pgbench"
VERSIONS = sorted(p.parent.name for p in DATA.glob("pg*/progress.stderr"))


@pytest.mark.parametrize("version", VERSIONS)
def test_progress_lines(version: str):
    text = (DATA / version / "progress.stderr").read_text()
    lines = parse_progress(text)
    raw = [line for line in text.splitlines() if line.startswith("progress:")]
    assert len(lines) == len(raw) >= 3
    assert [p.elapsed_s for p in lines] == [float(i) for i in range(1, len(lines) + 1)]
    first = raw[0].split(", ")
    assert lines[0].tps == float(first[1].split()[0])
    assert lines[0].latency_avg_ms == float(first[2].split()[1])
    assert lines[0].lag_ms is None and lines[0].skipped is None
    assert (lines[0].failed is None) == (version == "pg14")


@pytest.mark.parametrize("version", VERSIONS)
def test_progress_under_rate_limit(version: str):
    lines = parse_progress((DATA / version / "progress_rate.stderr").read_text())
    assert lines and all(p.lag_ms is not None and p.skipped is not None for p in lines)
    assert all(250 <= p.tps <= 350 for p in lines[1:])  # -R 300


def test_idle_second_has_no_latency():
    (line,) = parse_progress("progress: 5.0 s, 0.0 tps, lat NaN ms stddev NaN, 0 failed\n")
    assert line.tps == 0.0 and line.latency_avg_ms is None and line.latency_stddev_ms is None
