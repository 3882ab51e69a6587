"""The metric catalog (data/metrics.toml) against the series the collectors really produce, and
the terminal timeline and charts that take their names, labels, units and digits from it.

Collector output comes from recorded /proc and pg_stat snapshots (tests/data/proc, pgstats), and
from the real sampler reading this machine's /proc for two seconds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from pgdyno.catalogs.metrics import (
    MetricCatalogError,
    catalog,
    compact_columns,
    find,
    parse_catalog,
    pg_counters,
)
from pgdyno.collect.pgstats import pg_sample
from pgdyno.collect.procfs import os_sample, read_snapshot
from pgdyno.collect.sampler import TimelineSampler
from pgdyno.collect.timeline import progress_samples
from pgdyno.pgbench.progress import Progress
from pgdyno.records import DeviceLayout, Event, RunDevice, SecondRow
from pgdyno.records.stored import StoredRun
from pgdyno.report.charts import Series
from pgdyno.report.timelines import cpu_memory, disk_io, tps_latency
from pgdyno.results.store import ResultsStore
from pgdyno.terminal.timeline import compact_table, timeline_csv

DATA = Path(__file__).parent.parent / "data"
NAME = re.compile(
    r"^[a-z][a-z0-9_]*(\.([a-z0-9_]+|\{device\}|\{type\}_aas|\{event\}_aas|\{backend\}|\{object\}"
    r"|\{context\}))*$"
)


def recorded_os(scenario: str) -> dict[str, float]:
    def snapshot(when: str):  # type: ignore[no-untyped-def]
        root = DATA / "proc" / scenario / when
        at = float((root / "at").read_text())
        return read_snapshot(root, clock=lambda: at)

    return os_sample(snapshot("t0"), snapshot("t1"))


def recorded_pg(major: int | str) -> dict[str, float]:
    """pg_sample of a recorded pair: pg<major>.json, or the file named (without .json)."""
    name = f"pg{major}" if isinstance(major, int) else major
    first, second = json.loads((DATA / "pgstats" / f"{name}.json").read_text())["snapshots"]
    return pg_sample(first["values"], second["values"], second["at"] - first["at"])


def source_of(name: str) -> str:
    metric = find(name)
    return "" if metric is None else metric.source


def catalog_names(source_prefix: str) -> set[str]:
    return {m.name for m in catalog() if m.source.startswith(source_prefix)}


# -- the catalog and the collectors name the same series ---------------------------------------


def test_names_are_unique_dotted_and_labelled():
    names = [m.name for m in catalog()]
    assert len(names) == len(set(names))
    for metric in catalog():
        assert NAME.match(metric.name), metric.name
        assert metric.label and metric.unit and metric.source, metric.name


def test_every_os_metric_of_recorded_snapshots_is_in_the_catalog_and_back():
    produced = set(recorded_os("disk-write")) | set(recorded_os("idle"))
    unknown = sorted(n for n in produced if find(n) is None)
    assert unknown == []
    # the recorded VM has one disk (vda) and PSI: every /proc metric of the catalog shows up
    listed = {m for m in catalog_names("/proc/") if not m.startswith("client.")}
    found = {next(m.name for m in catalog() if m.matches(n)) for n in produced}
    assert listed - found == set()
    assert "disk.vda.util_pct" in produced


def test_meminfo_and_vmstat_metrics_read_the_fields_the_catalog_names():
    sample = recorded_os("idle")
    meminfo = (DATA / "proc" / "idle" / "t1" / "meminfo").read_text()
    dirty_kb = int(re.search(r"^Dirty:\s+(\d+) kB", meminfo, re.M).group(1))  # type: ignore[union-attr]
    assert sample["mem.dirty_mb"] == pytest.approx(dirty_kb / 1024)
    assert {m.field for m in catalog() if m.source == "/proc/vmstat"} == {
        "pswpin", "pswpout", "pgpgin", "pgpgout",
    }  # fmt: skip


@pytest.mark.parametrize("major", [14, 15, 16, 17, 18])
def test_every_pg_metric_of_recorded_snapshots_is_in_the_catalog(major: int):
    produced = set(recorded_pg(major))
    assert sorted(n for n in produced if not source_of(n).startswith("pg_stat")) == []
    # all the fixed ones on every version, through the version's own counters
    fixed = {m.name for m in catalog() if m.source.startswith("pg_stat") and not m.derived_from}
    fixed = {name for name in fixed if not name.startswith("io.")}
    assert {n for n in produced if not n.startswith("io.")} == fixed
    # pg_stat_io's rows (16+): one io.* series per moving counter, each a catalog metric
    io = {next(m.name for m in catalog() if m.matches(n)) for n in produced if n.startswith("io.")}
    assert bool(io) == (major >= 16)
    if io:
        assert "io.{backend}.{object}.{context}.hits_per_s" in io


@pytest.mark.parametrize("major", [16, 17, 18])
def test_io_times_with_track_io_timing_are_in_the_catalog(major: int):
    produced = set(recorded_pg(f"pg{major}_track_io_timing"))
    assert sorted(n for n in produced if not source_of(n).startswith("pg_stat")) == []
    assert any(n.endswith("_time_ms_per_s") for n in produced)


def test_backend_writes_prefer_pg_stat_io():
    assert pg_counters("rate")["pg.buffers_backend_per_s"] == (
        "pgstat_io.backend_buffers", "pgstat_bgwriter.buffers_backend",
    )  # fmt: skip
    assert list(pg_counters("count")) == [
        "pg.checkpoints_timed", "pg.checkpoints_requested", "pg.wal_buffers_full",
        "pg.temp_files", "pg.deadlocks",
    ]  # fmt: skip


def test_pgbench_seconds_and_progress_are_in_the_catalog():
    columns = {f.name for f in dataclasses.fields(SecondRow)} - {"t"}
    assert columns == catalog_names("pgbench transaction log")
    progress = Progress(1.0, 10.0, 1.0, 0.1, 0, None, None)
    [(_, name, _)] = progress_samples([progress], 1000.0)
    assert find(name) is not None and find(name).source.startswith("pgbench progress")  # type: ignore[union-attr]


def test_the_live_sampler_names_only_catalog_metrics():
    sampler = TimelineSampler(log=lambda _: None, proc_root=Path("/proc"))
    sampler.watch_pid(os.getpid())
    sampler.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len({t for t, *_ in sampler.timeline.samples}) < 2:
        sum(range(100_000))  # some CPU of our own for client.cpu_pct
        time.sleep(0.05)
    names = {name for _, name, _ in sampler.stop().samples}
    assert "client.cpu_pct" in names and "cpu.user_pct" in names
    assert sorted(n for n in names if find(n) is None) == []


# -- the terminal timeline and the CSV ---------------------------------------------------------

# The compact columns as they were written in terminal/timeline.py before the catalog existed:
# (header, series, digits); {data} is the data directory's device.
COMPACT_BEFORE = (
    ("TPS", "tps", 0), ("p50 ms", "latency_p50_ms", 2), ("p99 ms", "latency_p99_ms", 2),
    ("max ms", "latency_max_ms", 1), ("usr%", "cpu.user_pct", 0), ("sys%", "cpu.system_pct", 0),
    ("wait%", "cpu.iowait_pct", 0), ("rMB/s", "disk.{data}.read_mbps", 1),
    ("wMB/s", "disk.{data}.write_mbps", 1), ("util%", "disk.{data}.util_pct", 0),
    ("dirty MB", "mem.dirty_mb", 0), ("wback MB", "mem.writeback_mb", 0),
    ("ckpt buf/s", "pg.buffers_checkpoint_per_s", 0), ("bgw buf/s", "pg.buffers_bgwriter_per_s", 0),
    ("bknd buf/s", "pg.buffers_backend_per_s", 0), ("WAL MB/s", "pg.wal_mb_per_s", 1),
)  # fmt: skip


def test_compact_columns_are_the_ones_the_terminal_always_showed():
    now = tuple((m.column, m.named("{data}"), m.digits) for m in compact_columns())
    assert now == COMPACT_BEFORE


def a_run() -> tuple[StoredRun, dict[str, dict[int, float]]]:
    """A recorded run (from the report test database) given hand-made seconds and devices."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "results.sqlite"
        shutil.copy(DATA / "report" / "results.sqlite", copy)  # opening migrates: use a copy
        with ResultsStore(copy) as store:
            recorded = store.get_run(1)
    assert recorded is not None
    run = dataclasses.replace(
        recorded,
        id=7,
        devices=DeviceLayout(True, RunDevice("data", "/", "vda", None, "254:0", "/", "", "", "")),
        events=(Event(101.5, "checkpoint_start", {}),),
        seconds=(
            SecondRow(100, 1234.0, latency_p99_ms=3.456),
            SecondRow(101, 1300.0, latency_p99_ms=2.5, latency_p50_ms=1.25),
        ),
    )
    samples = {
        "pg.wal_bytes_per_s": {100: 2_500_000.0, 101: 3_000_000.0},
        "disk.vda.write_mbps": {100: 12.34},
        "disk.sdb.write_mbps": {100: 99.0},
        "cpu.user_pct": {101: 45.6},
    }
    return run, samples


def test_compact_table_headers_digits_and_derived_wal_mb():
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(compact_table(*a_run()))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "TPS" in line)
    for shown in ("TPS", "p50 ms", "p99 ms", "usr%", "wMB/s", "WAL MB/s"):
        assert shown in header, shown
    assert "bknd buf/s" not in header  # no series, no column
    assert "12.3" in text and "99.0" not in text  # the data device only, one decimal
    assert "3.46" in text and "2.5" in text and "1,234" in text
    assert "46" in text  # usr% without decimals


def test_csv_columns_are_the_series_names_sorted_with_derived_ones():
    lines = timeline_csv(*a_run()).splitlines()
    assert lines[0].split(",") == [
        "t", "elapsed_s", "cpu.user_pct", "disk.sdb.write_mbps", "disk.vda.write_mbps",
        "failures", "latency_p50_ms", "latency_p99_ms", "pg.wal_bytes_per_s", "pg.wal_mb_per_s",
        "skipped", "tps", "events",
    ]  # fmt: skip
    header = lines[0].split(",")
    assert header[-1] == "events" and "pg.wal_mb_per_s" in header
    wal_mb = [row.split(",")[header.index("pg.wal_mb_per_s")] for row in lines[1:]]
    assert wal_mb == ["2.5", "3"]
    assert all(find(n) is not None for n in header[2:-1])


# -- the charts --------------------------------------------------------------------------------


def one_group(values: dict[str, list[tuple[float, float]]]) -> list[Series]:
    return [Series("run 1", "#000000", values)]


def names_and_axes(figure: dict | None) -> tuple[list[str], list[str]]:  # type: ignore[type-arg]
    assert figure is not None
    layout = figure["layout"]
    axes = [layout[k]["title"]["text"] for k in ("yaxis", "yaxis2") if k in layout]
    return [t["name"] for t in figure["data"]], axes


def test_chart_labels_and_units_come_out_as_before():
    point = [(0.0, 1.0)]
    names = (
        "cpu.user_pct", "cpu.system_pct", "cpu.iowait_pct", "cpu.steal_pct", "mem.dirty_mb",
        "mem.writeback_mb", "tps", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
        "disk.vda.write_mbps", "disk.vda.read_mbps", "disk.sdb.read_mbps",
    )  # fmt: skip
    series = one_group(dict.fromkeys(names, point))
    assert names_and_axes(cpu_memory(series, "t")) == (
        ["user", "system", "iowait", "steal", "Dirty", "Writeback"], ["CPU %", "memory MB"],
    )  # fmt: skip
    assert names_and_axes(tps_latency(series, "t")) == (
        ["TPS", "p50", "p99", "max"], ["TPS", "latency ms (log)"],
    )  # fmt: skip
    on_vda = [dataclasses.replace(series[0], devices=(("data", "vda"),))]
    assert names_and_axes(disk_io(on_vda, "t")) == (
        ["data write", "data read"], ["data device vda MB/s"],
    )  # fmt: skip
    apart = [dataclasses.replace(series[0], devices=(("data", "vda"), ("wal", "sdb")))]
    assert names_and_axes(disk_io(apart, "t")) == (["data write", "data read", "wal read"],
                                   ["data device vda MB/s", "WAL device sdb MB/s"])  # fmt: skip
    hover = cpu_memory(series, "t")["data"][0]["hovertemplate"]  # type: ignore[index]
    assert hover == "%{y:.4~g} user<extra>run 1</extra>"


# -- a malformed catalog is refused with the entry and key named --------------------------------

GOOD = 'name = "x.y"\nlabel = "y"\nunit = "%"\ndigits = 0\nsource = "/proc/stat"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[metric]]\n" + GOOD + "[[metric]]\n" + GOOD, "'x.y' is listed twice"),
        ("[[metric]]\n" + GOOD + "colour = 1\n", "'x.y' has an unknown key 'colour'"),
        ("[[metric]]\n" + GOOD.replace("digits = 0", 'digits = "0"'), "'digits' must be a int"),
        ("[[metric]]\n" + GOOD.replace("digits = 0", "digits = -1"), "'digits' must be 0"),
        ("[[metric]]\n" + GOOD.replace('label = "y"\n', ""), "'label' must be a str"),
        ("[[metric]]\n" + GOOD + 'counters = ["a.b"]\n', "'counters' and 'kind' go together"),
        ("[[metric]]\n" + GOOD + 'counters = ["a.b"]\nkind = "avg"\n', "'kind' must be"),
        ("[[metric]]\n" + GOOD + 'from = "nope"\n', "computed from 'nope'"),
        ("[[metric]\n", "is not valid TOML"),
        ("metric = [1]\n", "metric 1 is not a table"),
    ],
)
def test_malformed_catalogs_are_refused(text: str, message: str):
    with pytest.raises(MetricCatalogError, match=re.escape(message)):
        parse_catalog(text, "metrics.toml")


def test_device_metrics_match_one_device_name_only():
    assert find("disk.nvme0n1p2.aqu_sz").name == "disk.{device}.aqu_sz"  # type: ignore[union-attr]
    assert find("disk.a.b.aqu_sz") is None
    assert find("disk..aqu_sz") is None
