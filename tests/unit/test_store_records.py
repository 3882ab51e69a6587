"""Health, interference and the rounds cross the results store as typed records: written as the
JSON they always were, read back equal, and read from what earlier versions stored."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from pgdyno.experiment.rounds import Adaptive, RoundLog
from pgdyno.records import RunCell, RunRecord
from pgdyno.records.capacity import Capacity
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import NewComparison
from pgdyno.results import decode
from pgdyno.results.encode import rounds_json, to_json
from pgdyno.results.store import ResultsStore
from pgdyno.stats.stopping import Decision

# the design and its seed: issue 33
ROUND_KEYS = ["rounds", "order", "seconds", "stopped", "unresolved", "more_rounds", "more_seconds",
              "design", "seed"]  # fmt: skip


def a_run(**changes: object) -> RunRecord:
    run = RunRecord(
        cell=RunCell(0, 1, "select-only", 1, 1, 1), status="failed", started_at="a",
        finished_at="b", duration_s=5, protocol="simple", rate=None, warmup_s=0,
        pg_version="18.6", pgbench_version="18.6", pgbench_argv=(), settings={},
        dataset_bytes=None,
    )  # fmt: skip
    return replace(run, **changes)  # type: ignore[arg-type]


def new_comparison() -> NewComparison:
    return NewComparison(
        name="p", plan_path="p.toml", plan_digest="d", plan_text="", mode="sets",
        baseline="a", scales=(1,), sets=(("a", {}), ("b", {"pg": {"work_mem": "8MB"}})),
    )  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_round_log_gives_the_shape_compare_json_always_printed() -> None:
    clock = Clock()
    log = RoundLog(Adaptive(2.0, 600.0), clock=clock)
    for order, took in ((["a", "b"], 30.04), (["b", "a"], 31.0)):
        log.begin(order)
        clock.now += took
        log.end()
    log.decision = Decision(True, "budget", 1, 4, 123.456)
    got = rounds_json(log.history())
    assert got == {
        "mode": "adaptive", "precision_pct": 2.0, "budget_s": 600.0, "mixture_rounds": 19,
        "rounds": 2,
        "order": [["a", "b"], ["b", "a"]], "seconds": 61.0, "stopped": "budget",
        "unresolved": 1, "more_rounds": 4, "more_seconds": 123.5, "design": "rotation",
        "seed": None,
    }  # fmt: skip
    assert list(got) == ["mode", "precision_pct", "budget_s", "mixture_rounds", *ROUND_KEYS]
    fixed = rounds_json(RoundLog(None).history())
    assert list(fixed) == ["mode", *ROUND_KEYS]  # no precision nor budget without adaptive rounds
    assert fixed["stopped"] is None and fixed["order"] == []


def test_rounds_health_and_interference_read_back_equal(tmp_path: Path) -> None:
    rounds = RoundHistory(
        "adaptive", 3, (("a", "b"), ("b", "a"), ("a", "b")), 95.5, "resolved",
        unresolved=0, precision_pct=2.0, budget_s=1200.0, mixture_rounds=5,
    )  # fmt: skip
    health = RunHealth(8, 0, 950.5, 2.25, -1.5, 40.0, 200.0, ("interference: ...",))
    found = Interference(12.5, 0.0, (("yes", 12.0),))
    with ResultsStore(tmp_path / "r.sqlite") as store:
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        cid = store.comparisons.create(new_comparison())
        store.comparisons.record_rounds(cid, rounds)
        run_id = store.add_run(
            session, a_run(status="ok", health=health, interference=found, comparison_id=cid)
        )
        stored = store.get_run(run_id)
        comparison = store.comparisons.get(cid)
        (outcome,) = store.comparisons.runs(cid)
        columns = store.db.conn.execute(
            "SELECT health, interference FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
    assert comparison is not None and comparison.rounds == rounds
    assert stored is not None and stored.health == health and stored.interference == found
    assert outcome.health == health and outcome.interference == found
    assert json.loads(columns["health"]) == to_json(stored)["health"]
    assert list(json.loads(columns["health"])) == [
        "measured_s", "trimmed_s", "tps_mean", "tps_cv_pct", "tps_trend_pct", "client_cpu_pct",
        "client_capacity_pct", "warnings",
    ]  # fmt: skip
    assert json.loads(columns["interference"]) == {
        "foreign_cpu_pct": 12.5, "steal_pct": 0.0, "top": [["yes", 12.0]],
    }  # fmt: skip
    assert to_json(comparison)["rounds"] == rounds_json(rounds)


def test_a_run_without_health_prints_an_empty_object(tmp_path: Path) -> None:
    """A failed run is not assessed: its column holds {} as before, and so does its JSON."""
    with ResultsStore(tmp_path / "r.sqlite") as store:
        session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", {}, {})
        run_id = store.add_run(session, a_run())
        stored = store.get_run(run_id)
        column = store.db.conn.execute("SELECT health FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert column["health"] == "{}"
    assert stored is not None and stored.health == RunHealth() and not stored.health.assessed
    assert to_json(stored)["health"] == {} and to_json(stored)["interference"] is None


def test_what_earlier_versions_stored_still_reads(tmp_path: Path) -> None:
    """Figures an earlier version did not keep read as None; damage stays a refusal."""
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        cid = store.comparisons.create(new_comparison())
        run_id = store.add_run(session, a_run(comparison_id=cid))
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE runs SET health = ?, interference = ? WHERE id = ?",
            ('{"tps_cv_pct": 3, "warnings": ["noisy"]}', '{"foreign_cpu_pct": 7}', run_id),
        )
        db.execute(
            "UPDATE comparisons SET rounds = ? WHERE id = ?",
            ('{"mode": "fixed", "rounds": 2, "order": [["a", "b"], ["b", "a"]]}', cid),
        )
    with ResultsStore(path) as store:
        stored = store.get_run(run_id)
        comparison = store.comparisons.get(cid)
    assert stored is not None and stored.health == RunHealth(tps_cv_pct=3, warnings=("noisy",))
    assert stored.interference == Interference(7, 0)
    assert comparison is not None
    assert comparison.rounds == RoundHistory("fixed", 2, (("a", "b"), ("b", "a")), 0.0, None)
    assert decode.rounds(None) is None and decode.interference(None) is None


def test_a_comparisons_capacity_sweeps_are_its_sets_newest(tmp_path: Path) -> None:
    """A plan's sets swept on capacity (issue 34 §1) are sessions whose server names the
    comparison and the set: `comparison_capacities` gives the newest sweep of each set of that
    comparison (a --resume sweeps again), never another comparison's nor a plain `pgdyno
    capacity` session (its server names no comparison, as every session stored before)."""

    def sweep(capacity_tps: float) -> Capacity:
        return Capacity(5.0, (), 900.0, capacity_tps, None, 0.9375, None, "budget", 5)

    with ResultsStore(tmp_path / "r.sqlite") as store:
        plain = store.begin_session(["pgdyno", "capacity"], "sandbox pg18", {}, {"version": 18})
        store.record_capacity(plain, sweep(1.0))
        made = [
            (store.begin_session(["pgdyno", "compare"], "compare p", {},
                                 {"plan": "p", "comparison_id": cid, "set": name}), tps)
            for cid, name, tps in ((1, "a", 10.0), (1, "b", 20.0), (2, "a", 30.0), (1, "a", 40.0))
        ]  # fmt: skip
        for session, tps in made:
            store.record_capacity(session, sweep(tps))
        found = store.comparison_capacities(1)
        assert store.comparison_capacities(3) == []
    assert [(name, c.capacity_tps) for name, c in found] == [("b", 20.0), ("a", 40.0)]
