"""The capacity sweep's pure parts: each step judged from recorded real pgbench -R output, the
plan through its phases, the load generator that cannot keep up, the knee, the result as the
store keeps it (old databases still load), and the command's bad input (issue 34)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import one_clear_sentence, schema_1_database
from pgdyno.collect.timeline import run_percentiles
from pgdyno.pgbench.output import parse_summary
from pgdyno.pgbench.txlog import summarize
from pgdyno.records import RunCell, RunRecord, SecondRow
from pgdyno.records.capacity import (
    BRACKETED,
    BUDGET,
    CLIENT_BOUND,
    CLIENT_LIMIT,
    FAILED,
    INTERFERED,
    NEVER_OVER,
    NEVER_UNDER,
    OVER,
    UNDER,
    UNSUSTAINED,
    CapacityStep,
)
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.results.store import ResultsStore
from pgdyno.stats.capacity import (
    NextStep,
    SweepPolicy,
    capacity_of,
    knee_of,
    next_step,
    step_of,
)

DATA = Path(__file__).parent.parent / "data" / "capacity"


def recorded(rate: int, sampling: float, cpu: float = 40.0) -> RunRecord:
    """A run as the bench runner makes it, from a recorded pgbench -R run."""
    summary = parse_summary((DATA / f"rate{rate}.stdout").read_text())
    logs = sorted(DATA.glob(f"rate{rate}.tx.*.log"))
    _, total = summarize(logs, sampling, with_lag=True)
    return RunRecord(
        cell=RunCell(0, 1, "select-only", 4, 2, 1), status="ok", started_at="", finished_at="",
        duration_s=2, protocol="simple", rate=float(rate), warmup_s=0, pg_version="18.6",
        pgbench_version="18.6", pgbench_argv=(), settings={}, dataset_bytes=None,
        summary=summary, latency=run_percentiles(total),
        health=RunHealth(client_cpu_pct=cpu, client_capacity_pct=200.0),
    )  # fmt: skip


def test_recorded_steps_are_judged():
    policy = SweepPolicy(5.0, 2.0)  # its p99: 4.06 ms
    kept = step_of(11, recorded(5000, 1.0), "sweep", policy)
    assert kept.verdict == UNDER and kept.run_id == 11
    assert kept.achieved_tps == pytest.approx(4986.55, abs=0.01)
    assert kept.lag_avg_ms == pytest.approx(0.257) and kept.lag_max_ms == pytest.approx(8.307)
    assert kept.p50_ms is not None and kept.p99_ms is not None
    assert kept.p50_ms < kept.p90_ms < kept.p95_ms < kept.p99_ms < 5.0  # type: ignore[operator]
    assert step_of(11, recorded(5000, 1.0), "sweep", SweepPolicy(2.0, 2.0)).verdict == OVER
    # 80,000 asked, 45,920 achieved, 429 ms of lag: the server did not carry the rate.
    lost = step_of(12, recorded(80000, 0.1), "sweep", SweepPolicy(1000.0, 2.0))
    assert lost.verdict == UNSUSTAINED and lost.lag_avg_ms == pytest.approx(428.852)
    # The same run with pgbench using 190% of its 200%: the load generator was the limit.
    assert kept.lag_growth_ms is None  # no per-second rows in this record
    growing = replace(recorded(5000, 1.0), seconds=tuple(
        SecondRow(t, 5000.0, lag_avg_ms=lag) for t, lag in ((0, 0.2), (1, 1.5), (2, 2.9))
    ))  # fmt: skip
    queued = step_of(11, growing, "sweep", policy)  # p99 4.06 ms, but the lag grew 2.7 ms
    assert queued.lag_growth_ms == pytest.approx(2.7) and queued.verdict == UNSUSTAINED
    bound = step_of(12, recorded(80000, 0.1, cpu=190.0), "sweep", policy)
    assert bound.verdict == CLIENT_BOUND
    failed = step_of(13, replace(recorded(5000, 1.0), status="failed", latency=None), "", policy)
    assert failed.verdict == "failed" and failed.p99_ms is None
    disturbed = replace(recorded(5000, 1.0), interference=flagged())
    assert step_of(14, disturbed, "sweep", policy).verdict == INTERFERED


def flagged() -> Interference:
    return Interference(40.0, 0.0, (("stress-ng", 38.0),))


def test_failed_and_disturbed_steps_are_run_again():
    steps = [step(250, UNDER), step(500, INTERFERED), step(500, FAILED)]
    assert next_step(steps, 1000.0, SweepPolicy(2.0, 2.0)) == NextStep(500.0, "sweep")
    found = capacity_of(steps, 1000.0, SweepPolicy(2.0, 2.0), BUDGET)
    assert any("1 steps were disturbed" in n for n in found.notes)


def step(rate: float, verdict: str, p99: float = 1.0, achieved: float | None = None):
    return CapacityStep(None, "", rate, achieved or rate, p99 / 3, p99 / 2, p99, 0.1, 1.0, 0,
                        30.0, 200.0, verdict)  # fmt: skip


def plan_of(verdicts: dict[float, list[str]], repeats: int = 2) -> NextStep | str:
    steps = [step(rate, v) for rate, vs in verdicts.items() for v in vs]
    return next_step(steps, 1000.0, SweepPolicy(2.0, 2.0, repeats=repeats))


def test_the_plan_goes_up_the_ladder_then_bisects_then_repeats():
    assert plan_of({}) == NextStep(250.0, "sweep")
    assert plan_of({250: [UNDER]}) == NextStep(500.0, "sweep")
    assert plan_of({250: [UNDER], 500: [UNDER], 700: [OVER]}) == NextStep(600.0, "bisect")
    near = {250: [UNDER], 500: [UNDER], 690: [UNDER], 700: [UNSUSTAINED]}
    assert plan_of(near) == NextStep(690.0, "repeat")
    assert plan_of({**near, 690: [UNDER, UNDER]}) == NextStep(700.0, "repeat")
    assert plan_of({**near, 690: [UNDER, UNDER], 700: [OVER, OVER]}) == BRACKETED


def test_a_rate_with_both_verdicts_widens_the_interval():
    """690 was under once and over once: it lies inside the interval, which moves out to the
    next rate confirmed under (500) after bisecting between them."""
    mixed = {250: [UNDER], 500: [UNDER, UNDER], 690: [UNDER, OVER], 700: [OVER, OVER]}
    assert plan_of(mixed) == NextStep(595.0, "bisect")
    done = {**mixed, 595: [UNDER, UNDER], 640: [UNDER, UNDER], 665: [OVER, OVER]}
    assert plan_of(done) == BRACKETED
    steps = [step(r, v) for r, vs in done.items() for v in vs]
    found = capacity_of(steps, 1000.0, SweepPolicy(2.0, 2.0, repeats=2), BRACKETED)
    assert (found.capacity_tps, found.over_tps) == (640.0, 665.0)
    assert found.confidence == 0.5


def test_the_ladder_goes_down_and_up_to_its_ends():
    assert plan_of({250: [OVER]}) == NextStep(125.0, "sweep")
    assert plan_of({r: [OVER] for r in (250, 125, 62.5, 31.2, 15.6)}) == NEVER_UNDER
    top = {r: [UNDER] for r in (250, 500, 700, 850, 1000, 1250, 1560, 1950, 2440)}
    assert plan_of(top) == NEVER_OVER
    found = capacity_of([step(r, UNDER) for r in top], 1000.0, SweepPolicy(2.0, 2.0), NEVER_OVER)
    assert found.capacity_tps is None and "stayed under 2 ms" in found.notes[0]


def test_a_load_generator_that_cannot_keep_up_stops_the_sweep_and_is_said():
    steps = [step(250, UNDER), step(500, UNDER), step(700, CLIENT_BOUND)]
    assert next_step(steps, 1000.0, SweepPolicy(2.0, 2.0)) == CLIENT_LIMIT
    found = capacity_of(steps, 1000.0, SweepPolicy(2.0, 2.0), CLIENT_LIMIT)
    assert found.over_tps is None  # never the server's limit
    assert found.notes[0].startswith("the load generator could not keep up at 700 tx/s")


def test_the_knee_is_where_the_p99_bends():
    p99 = {100: 0.3, 200: 0.32, 300: 0.35, 400: 0.45, 450: 0.9, 480: 3.0}
    steps = [step(r, UNDER if p < 1 else OVER, p99=p) for r, p in p99.items()]
    steps.append(step(500, UNSUSTAINED, p99=50.0, achieved=430))  # left out: not sustained
    knee = knee_of(steps)
    assert knee is not None and knee.asked_tps == 400.0 and knee.p99_ms == 0.45  # bend begins
    assert knee_of(steps[:2]) is None


def test_the_store_keeps_the_sweep_and_old_databases_load(tmp_path: Path):
    path = tmp_path / "old.sqlite"
    schema_1_database(path)  # a database from before capacity sweeps: migrated on open
    steps = [step(250, UNDER), step(250, UNDER), step(260, OVER), step(260, OVER)]
    found = capacity_of(steps, 1000.0, SweepPolicy(2.0, 2.0, repeats=2), BRACKETED)
    with ResultsStore(path) as store:
        assert store.capacity(1) is None  # the old session is no sweep
        store.record_capacity(1, found)
    with ResultsStore(path, writing=False) as store:
        assert store.capacity(1) == found
        assert store.recent_tps("tpcb-like", 1, 1, "18.6", "sandbox pg18") == 123.5
        assert store.recent_tps("tpcb-like", 1, 1, "18.6", "sandbox pg18", closed_loop=True)


def stored_sweeps(path: Path, *brackets: tuple[float, float]) -> None:
    """A results database with one capacity session per bracket (confirmed at 5 repeats)."""
    policy = SweepPolicy(5.0, 2.0, repeats=5)
    with ResultsStore(path) as store:
        for low, high in brackets:
            steps = [step(low, UNDER)] * 5 + [step(high, OVER)] * 5
            session = store.begin_session(["pgdyno", "capacity"], "sandbox pg18", {}, {})
            store.record_capacity(session, capacity_of(steps, 2000.0, policy, BRACKETED))


def test_two_stored_sweeps_are_compared_on_capacity(run_cli, tmp_path: Path):
    stored_sweeps(tmp_path / "results.sqlite", (1000, 1050), (1200, 1250), (1010, 1060))
    more = run_cli(tmp_path, "capacity", "--compare", "1", "2", "--json")
    assert more.code == 0, more.stderr
    found = json.loads(more.stdout)
    assert found["verdict"] == "more" and found["confidence"] == 0.875
    assert found["line"] == ("session 2 carries +20% [+14, +25] more load than session 1 at "
                             "p99 <= 5 ms (>= 87.5% confidence)")  # fmt: skip
    same = run_cli(tmp_path, "capacity", "--compare", "1", "3")
    assert "no detectable difference" in same.stdout
    none = run_cli(tmp_path, "capacity", "--compare", "1", "9")
    assert none.code == 2
    assert "session 9 in" in one_clear_sentence(none.stderr)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "--p99 is missing"),
        (("--p99", "abc"), "--p99 'abc' is not a latency"),
        (("--p99", "0ms"), "is no time at all"),
        (("--p99", "2ms", "--budget", "20s"), "holds fewer than 2 steps of about 13 s"),
        (("--p99", "2ms", "-s", "1,2"), "capacity sweeps one"),
    ],
)
def test_bad_input_is_one_sentence(run_cli, tmp_path: Path, args: tuple[str, ...], says: str):
    result = run_cli(tmp_path, "capacity", *args)
    assert result.code == 2
    assert says in one_clear_sentence(result.stderr)
