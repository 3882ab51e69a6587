"""Runs built from recorded pgbench output, to store in real results databases (SQLite and
PostgreSQL) without running pgbench."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pgdyno.collect.timeline import run_percentiles, second_rows
from pgdyno.pgbench.output import parse_summary
from pgdyno.pgbench.txlog import summarize
from pgdyno.records import Event, RunCell, RunRecord
from pgdyno.records.health import RunHealth
from pgdyno.records.stored import NewComparison

PGBENCH = Path(__file__).parent / "data" / "pgbench" / "pg18"


def recorded_run() -> RunRecord:
    summary = parse_summary((PGBENCH / "tpcb_r.stdout").read_text())
    (second,), total = summarize([PGBENCH / "txlog.log"])  # one second of recorded log
    per_second = [replace(second, t=(second.t or 0) + i) for i in range(4)]
    started = float(per_second[0].t or 0)
    return RunRecord(
        cell=RunCell(0, 2, "tpcb-like", 2, 2, 1), status="ok",
        started_at="2026-11-21T12:00:00Z", finished_at="2026-11-21T12:00:03Z", duration_s=3,
        protocol="simple", rate=None, warmup_s=0, pg_version="18.6", pgbench_version="18.6",
        pgbench_argv=("pgbench", "-c", "2"), settings={"work_mem": "4096 kB"},
        dataset_bytes=30_000_000, summary=summary,
        seconds=tuple(second_rows(per_second, total, total.transactions)),  # 2 whole seconds
        latency=run_percentiles(total), latency_source="every transaction",
        samples=((int(started), "cpu.user_pct", 12.5), (int(started) + 1, "cpu.user_pct", 14.0)),
        events=(Event(started + 0.5, "checkpoint_start", {"reason": "time"}),),
        health=RunHealth(measured_s=2, trimmed_s=0, tps_cv_pct=3.0),
    )  # fmt: skip


def run_at(second: int, **changes: object) -> RunRecord:
    """The recorded run as if started `second` seconds later (a run of its own: its uid
    differs), with `changes` to its fields."""
    run = recorded_run()
    stamp = f"2026-11-21T12:{second // 60 % 60:02d}:{second % 60:02d}Z"
    return replace(run, started_at=stamp, **changes)  # type: ignore[arg-type]


def new_comparison(name: str = "p") -> NewComparison:
    return NewComparison(
        name=name, plan_path=f"{name}.toml", plan_digest=f"digest-{name}", plan_text="[x]",
        mode="sets", baseline="a", scales=(2,),
        sets=(("a", {}), ("b", {"pg": {"work_mem": "8MB"}})),
    )  # fmt: skip


def write_runs(worker: int, count: int, conninfo: str) -> None:
    """One pgdyno-like process: a session of `count` runs into the store at `conninfo` (run as
    `python tests/store_runs.py WORKER COUNT DSN` by the tests and benchmarks of many writers)."""
    from pgdyno.environment import ResultsLocation
    from pgdyno.results.open import open_results

    with open_results(ResultsLocation.of(conninfo)) as store:
        session = store.begin_session(["writer", str(worker)], "t", {}, {})
        for i in range(count):
            store.add_run(session, run_at(worker * 100_000 + i))
        store.finish_session(session, "done")


if __name__ == "__main__":
    import sys

    write_runs(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
