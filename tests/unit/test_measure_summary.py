"""A run's figures are a pure summary of what was collected (`summarized`): tested here on
recorded pgbench output, without running pgbench, a server or a sampler."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pgdyno.collect.sampler import Timeline
from pgdyno.collect.timeline import run_percentiles, second_rows
from pgdyno.experiment.measure import Collected, summarized
from pgdyno.pgbench.command import RunOptions, builtin_workload
from pgdyno.pgbench.execute import PgbenchResult
from pgdyno.pgbench.output import parse_summary
from pgdyno.pgbench.txlog import summarize
from pgdyno.records import Event
from pgdyno.records.interference import Interference

PGBENCH = Path(__file__).parent.parent / "data" / "pgbench" / "pg18"
OPTS = RunOptions(builtin_workload("tpcb-like"), clients=2, jobs=2, duration_s=5)


def collected(**changes: object) -> Collected:
    summary = parse_summary((PGBENCH / "tpcb_r.stdout").read_text())
    (second,), total = summarize([PGBENCH / "txlog.log"])  # one second of recorded log
    per_second = tuple(replace(second, t=(second.t or 0) + i) for i in range(4))
    result = PgbenchResult(
        summary, "", (PGBENCH / "progress.stderr").read_text(), float(per_second[0].t or 0)
    )
    found = Collected(result, per_second, total, Timeline(), None, None)
    return replace(found, **changes)  # type: ignore[arg-type]


def test_the_summary_is_the_recorded_runs_rows_percentiles_and_progress() -> None:
    found = collected()
    measured = summarized(found, OPTS, trim_s=0, sampling_rate=1.0, cpus=2)
    total = found.total
    transactions = found.result.summary.transactions or total.transactions
    assert measured.seconds == tuple(second_rows(list(found.per_second), total, transactions))
    assert measured.latency == run_percentiles(total)
    assert measured.latency_source == "every transaction"
    assert measured.health.measured_s == len(measured.seconds)
    progress = [s for s in measured.samples if s[1] == "pgbench.progress_tps"]
    assert [v for _, _, v in progress][:2] == [1826.9, 1747.0]  # pgbench's -P 1 lines
    assert measured.interference is None and measured.waits is None


def test_what_went_wrong_beside_the_run_is_in_its_health() -> None:
    found = collected(
        timeline=Timeline(gaps=["the disk series end at 3 s (sampler stopped)"]),
        interference=Interference(42.0, 1.5, (("yes", 40.0),)),
        clock_events=(Event(1.0, "clock_offset", {"host": "db1"}),),
    )
    measured = summarized(found, OPTS, trim_s=0, sampling_rate=1.0, cpus=2)
    warnings = measured.health.warnings
    assert "the disk series end at 3 s (sampler stopped)" in warnings
    assert Interference(42.0, 1.5, (("yes", 40.0),)).warning() in warnings
    assert measured.interference == found.interference
    assert Event(1.0, "clock_offset", {"host": "db1"}) in measured.events


def test_pgbench_s_missing_stddev_comes_from_its_log() -> None:
    found = collected()
    no_stddev = replace(found.result.summary, latency_stddev_ms=None)
    measured = summarized(
        replace(found, result=replace(found.result, summary=no_stddev)), OPTS, 0, 1.0, 2
    )
    assert measured.summary.latency_stddev_ms == found.total.stddev_ms is not None
