"""The run loop judges a comparison's rounds on the runs it keeps in memory (`RunOutcome.of`),
never reading the store back: the runs written to a real SQLite results store and read back
must give the same verdicts, and the same stopping decision, as the runs in memory."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pgdyno.experiment.rounds import Adaptive, RoundLog, RoundPlan, judge_round
from pgdyno.records import Percentiles, RunCell, RunRecord
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.pgbench import Summary
from pgdyno.records.stored import NewComparison, RunOutcome
from pgdyno.results.store import ResultsStore
from pgdyno.stats.analysis import Judging, analyse

SETS = ("base", "b", "c")
CELLS = ((1, 1), (1, 4))  # (scale, clients)

# Figures of one host's runs (a spread of a few tens of %): what the verdicts are about. The
# floats are any the store must keep exactly, not round numbers.
finite = st.floats(min_value=800.0, max_value=1_200.0, allow_nan=False)
latency = st.floats(min_value=2.0, max_value=3.0, allow_nan=False)
share = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@st.composite
def runs(draw: st.DrawFn) -> tuple[int, list[tuple[str, int, int, RunRecord]]]:
    """A comparison of 2 or 3 sets over 2 to 6 rounds of one or two cells, its runs in the
    order they ran: finished or failed, some disturbed, some with warnings."""
    sets = draw(st.integers(min_value=2, max_value=3))
    rounds = draw(st.integers(min_value=2, max_value=6))
    cells = CELLS[: draw(st.integers(min_value=1, max_value=2))]
    made = []
    for repeat in range(1, rounds + 1):
        for name in SETS[:sets]:
            for scale, clients in cells:
                made.append((name, scale, clients, draw(a_run(name, scale, clients, repeat))))
    return sets, made


@st.composite
def a_run(draw: st.DrawFn, name: str, scale: int, clients: int, repeat: int) -> RunRecord:
    ok = draw(st.sampled_from([True, True, True, False]))  # a failed run now and then
    tps, avg, p99 = draw(finite), draw(latency), draw(latency)
    interference = draw(st.none() | st.builds(Interference, share, share))
    warnings = draw(st.lists(st.sampled_from(["unstable TPS", "trend 12%"]), max_size=2))
    return RunRecord(
        cell=RunCell(0, scale, "select-only", clients, min(clients, 2), repeat),
        status="ok" if ok else "failed", started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:00:05+00:00", duration_s=5, protocol="simple", rate=None,
        warmup_s=0, pg_version="18.1", pgbench_version="18.1", pgbench_argv=(), settings={},
        dataset_bytes=None, summary=_summary(tps, avg) if ok else None,
        latency=Percentiles(avg, avg, p99, p99, p99 * 2) if ok else None,
        health=RunHealth(5, 0, tps, 1.5, 0.2, 30.0, 200.0, tuple(warnings)) if ok else RunHealth(),
        set_name=name, interference=interference if ok else None,
    )  # fmt: skip


def _summary(tps: float, avg: float) -> Summary:
    return Summary(
        transaction_type="select-only", scaling_factor=1, query_mode="simple", clients=1,
        threads=1, duration_s=5.0, transactions=int(tps * 5), failed_transactions=0,
        latency_avg_ms=avg, latency_stddev_ms=None, initial_connection_time_ms=None, tps=tps,
        rate_lag_avg_ms=None, rate_lag_max_ms=None, skipped_transactions=None,
        late_transactions=None, maximum_tries=None, scripts=(), statements=(),
    )  # fmt: skip


def _stored_and_in_memory(
    path: Path, sets: int, made: list[tuple[str, int, int, RunRecord]]
) -> tuple[list[RunOutcome], list[RunOutcome]]:
    in_memory = []
    with ResultsStore(path) as store:
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        cid = store.comparisons.create(
            NewComparison(
                name="p", plan_path="p.toml", plan_digest="d", plan_text="", mode="sets",
                baseline="base", scales=(1,), sets=tuple((n, {}) for n in SETS[:sets]),
            )
        )  # fmt: skip
        for _, _, _, record in made:
            record = replace(record, comparison_id=cid)
            in_memory.append(RunOutcome.of(store.add_run(session, record), record))
    with ResultsStore(path) as store:
        return in_memory, store.comparisons.runs(cid)


@settings(max_examples=30, deadline=None)
@given(runs())
def test_the_stored_runs_give_the_verdicts_judged_in_memory(
    comparison: tuple[int, list[tuple[str, int, int, RunRecord]]],
) -> None:
    sets, made = comparison
    names = list(SETS[:sets])
    with tempfile.TemporaryDirectory() as folder:
        in_memory, stored = _stored_and_in_memory(Path(folder) / "r.sqlite", sets, made)
    assert [r.id for r in in_memory] == [r.id for r in stored]
    for sequential in (False, True):
        judging = Judging(sequential=sequential)
        assert (
            analyse(in_memory, names, "base", "sets", judging).as_dict()
            == analyse(stored, names, "base", "sets", judging).as_dict()
        )
    rounds = max(record.cell.repeat for *_, record in made)
    plan, adaptive = RoundPlan(tuple(names), "base", "sets"), Adaptive(2.0, 600.0)
    decisions = []
    for runs_seen in (in_memory, stored):
        log = RoundLog(adaptive, clock=lambda: 0.0)
        judge_round(runs_seen, plan, adaptive, log, rounds)
        decisions.append(log.decision)
    assert decisions[0] == decisions[1]
