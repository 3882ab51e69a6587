"""pg_stat_io row by row (collect/pgstat_io.py) on snapshots recorded from real PostgreSQL 16, 17
and 18 servers around a 5-second pgbench run (tests/data/pgstats/README.md): pgN.json with
track_io_timing off (the default), pgN_track_io_timing.json with it on."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pgdyno.collect.pgstat_io import IO_COUNTERS, ROWS, io_sample, series_name, without_idle_io
from pgdyno.collect.pgstats import pg_sample

DATA = Path(__file__).parent.parent / "data" / "pgstats"
COUNTERS = "pgstat_io_rows.counters."
MAJORS = [16, 17, 18]
FILES = [f"pg{m}" for m in MAJORS] + [f"pg{m}_track_io_timing" for m in MAJORS]
BLOCK = 8192


def recorded(name: str) -> tuple[dict[str, float], dict[str, float], float]:
    first, second = json.loads((DATA / f"{name}.json").read_text())["snapshots"]
    return first["values"], second["values"], second["at"] - first["at"]


def rows(snapshot: dict[str, float]) -> dict[str, dict[str, float]]:
    """'<backend>.<object>.<context>' -> counter -> value."""
    out: dict[str, dict[str, float]] = {}
    for key, value in snapshot.items():
        if key.startswith(COUNTERS):
            row, _, counter = key.removeprefix(COUNTERS).rpartition(".")
            out.setdefault(row, {})[counter] = value
    return out


def io_of(sample: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in sample.items() if name.startswith("io.")}


def moved(
    prev: dict[str, float], cur: dict[str, float], row_filter: Callable[..., bool], counter: str
) -> float:
    """How much a counter grew, summed over the rows `row_filter` accepts."""
    before, after = rows(prev), rows(cur)
    return sum(
        values.get(counter, 0.0) - before.get(row, {}).get(counter, 0.0)
        for row, values in after.items()
        if row_filter(*row.split("."))
    )


# -- the snapshot's keys ----------------------------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_every_row_key_is_a_non_zero_known_counter(name: str):
    prev, cur = recorded(name)[:2]
    for snapshot in (prev, cur):
        keys = [key for key in snapshot if key.startswith(COUNTERS)]
        assert keys and all(series_name(key) is not None for key in keys)
        assert all(snapshot[key] > 0 for key in keys)  # the query leaves zeros out
        assert snapshot[ROWS] >= 30  # the view's rows: many more than those that moved
        assert len(rows(snapshot)) < snapshot[ROWS]
    assert {k for k in prev if k.startswith(COUNTERS)} <= set(cur)  # cumulative


# -- the series: deltas per second, per row ----------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_series_are_the_deltas_per_second_of_each_row(name: str):
    prev, cur, seconds = recorded(name)
    sample = io_of(pg_sample(prev, cur, seconds))
    expected = {
        f"io.{row}.{IO_COUNTERS[counter]}": (value - rows(prev)[row][counter]) / seconds
        for row, values in rows(cur).items()
        for counter, value in values.items()
    }
    assert sample == pytest.approx(expected)
    # what a tpcb-like run with checkpoints every 32MB of WAL does, per process type
    assert sample["io.client_backend.relation.normal.hits_per_s"] > 1000
    assert sample["io.client_backend.relation.normal.reads_per_s"] > 0
    assert sample["io.client_backend.relation.normal.extends_per_s"] > 0
    assert sample["io.checkpointer.relation.normal.writes_per_s"] > 0
    assert sample["io.checkpointer.relation.normal.fsyncs_per_s"] > 0
    # what initdb did (standalone backend) is there, but did not move during the run
    standalone = [v for n, v in sample.items() if n.startswith("io.standalone_backend.")]
    assert standalone and all(v == 0 for v in standalone)


@pytest.mark.parametrize("major", MAJORS)
def test_rows_add_up_to_the_summed_figures(major: int):
    """The same statement reads pg_stat_io twice: the rows and the sums agree exactly."""
    prev, cur, _ = recorded(f"pg{major}")

    def d(key: str) -> float:
        return cur[key] - prev[key]

    checkpointer = moved(
        prev, cur, lambda b, o, _c: b == "checkpointer" and o == "relation", "write_bytes"
    )
    assert checkpointer == d("pgstat_io.checkpointer_write_bytes") > 0
    client = moved(prev, cur, lambda b, o, _c: b == "client_backend" and o != "wal", "read_bytes")
    assert client == d("pgstat_io.client_read_bytes") > 0
    hits = moved(prev, cur, lambda b, o, _c: b == "client_backend" and o != "wal", "hits")
    assert hits == d("pgstat_io.client_hits") > 0
    if major >= 18:
        wal = moved(prev, cur, lambda _b, o, _c: o == "wal", "writes")
        assert wal == d("pgstat_io.wal_writes") > 0


# -- blocks on 16 and 17, bytes on 18 ----------------------------------------------------------


@pytest.mark.parametrize("major", [16, 17])
def test_16_and_17_count_blocks_of_op_bytes(major: int):
    for values in rows(recorded(f"pg{major}")[1]).values():
        for op in ("read", "write", "extend"):
            count = values.get(f"{op}s", 0.0)
            assert values.get(f"{op}_bytes", 0.0) == count * BLOCK


def test_18_counts_bytes_and_one_read_may_span_blocks():
    found = rows(recorded("pg18")[1])
    for values in found.values():
        for op in ("read", "write", "extend"):
            size = values.get(f"{op}_bytes", 0.0)
            assert size % BLOCK == 0 and size >= values.get(f"{op}s", 0.0) * BLOCK
    # read streams: vacuum and sequential scans read many blocks per operation
    vacuum = found["client_backend.relation.vacuum"]
    assert vacuum["read_bytes"] / vacuum["reads"] > 8 * BLOCK
    normal = found["client_backend.relation.normal"]  # index lookups: mostly one block
    assert normal["read_bytes"] / normal["reads"] < 1.1 * BLOCK


WAL_18 = (
    "io.client_backend.wal.normal.writes_per_s",
    "io.client_backend.wal.normal.fsyncs_per_s",
    "io.walwriter.wal.normal.writes_per_s",
    "io.checkpointer.wal.normal.writes_per_s",
)


def test_18_names_the_wal_rows_16_and_17_have_none():
    sample = io_of(pg_sample(*recorded("pg18")))
    for name in WAL_18:
        assert sample[name] > 0, name
    for major in (16, 17):
        assert not any(".wal." in n for n in io_of(pg_sample(*recorded(f"pg{major}"))))


# -- times only with track_io_timing -----------------------------------------------------------


@pytest.mark.parametrize("major", MAJORS)
def test_times_are_absent_without_track_io_timing(major: int):
    prev, cur, seconds = recorded(f"pg{major}")
    assert not any(key.endswith("_time") for key in cur if key.startswith(COUNTERS))
    assert not any(n.endswith("_time_ms_per_s") for n in pg_sample(prev, cur, seconds))


@pytest.mark.parametrize("major", MAJORS)
def test_times_are_there_with_track_io_timing(major: int):
    sample = io_of(pg_sample(*recorded(f"pg{major}_track_io_timing")))
    assert sample["io.client_backend.relation.normal.read_time_ms_per_s"] > 0
    assert sample["io.checkpointer.relation.normal.write_time_ms_per_s"] > 0
    assert sample["io.checkpointer.relation.normal.fsync_time_ms_per_s"] > 0
    # WAL times need track_wal_io_timing, which stayed off
    assert not any(".wal." in n and n.endswith("_time_ms_per_s") for n in sample)


# -- missing and reset counters ------------------------------------------------------------------


def test_a_counter_missing_from_the_first_snapshot_was_zero():
    prev, cur, seconds = recorded("pg18")
    key = COUNTERS + "checkpointer.relation.normal.writes"
    without = {k: v for k, v in prev.items() if k != key}
    sample = io_sample(without, cur, seconds)
    assert sample["io.checkpointer.relation.normal.writes_per_s"] == cur[key] / seconds


def test_no_series_when_a_snapshot_lacks_the_view_or_time_does_not_pass():
    prev, cur, seconds = recorded("pg17")
    no_view = {k: v for k, v in prev.items() if not k.startswith("pgstat_io_rows.")}
    assert io_sample(no_view, cur, seconds) == {}
    assert io_sample(prev, cur, 0.0) == {}


def test_a_reset_row_gives_no_value_the_others_go_on():
    prev, cur, seconds = recorded("pg16")
    reset = dict(cur)
    reset[COUNTERS + "checkpointer.relation.normal.writes"] = 3.0  # pg_stat_reset_shared('io')
    del reset[COUNTERS + "checkpointer.relation.normal.fsyncs"]
    sample = io_sample(prev, reset, seconds)
    assert "io.checkpointer.relation.normal.writes_per_s" not in sample
    assert "io.checkpointer.relation.normal.fsyncs_per_s" not in sample
    assert sample["io.client_backend.relation.normal.hits_per_s"] > 0


# -- a run's timeline keeps the io.* series that moved ------------------------------------------


@pytest.mark.parametrize("major", MAJORS)
def test_series_that_stayed_at_zero_through_a_run_are_dropped(major: int):
    prev, cur, seconds = recorded(f"pg{major}")
    busy = pg_sample(prev, cur, seconds)
    idle = pg_sample(cur, cur, 1.0)  # a second later, nothing moved
    samples = [(1, n, v) for n, v in busy.items()] + [(2, n, v) for n, v in idle.items()]
    kept = {name for _, name, _ in without_idle_io(samples)}
    assert {n for n in kept if not n.startswith("io.")} == {
        n for n in busy if not n.startswith("io.")
    }
    assert {n for n in kept if n.startswith("io.")} == {n for n, v in io_of(busy).items() if v != 0}
    assert "io.client_backend.relation.normal.hits_per_s" in kept
    assert not any(n.startswith("io.standalone_backend.") for n in kept)
    assert len([n for n in kept if n.startswith("io.")]) < len(io_of(busy))
