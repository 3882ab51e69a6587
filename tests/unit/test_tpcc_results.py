"""The TPC-C-like figures of a run: NOPM and TPM from the counters, the mix against the
specification's minimums, the per-second NOPM series, their trip through the results store, and
the verdicts a comparison gives on NOPM."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.experiment.matrix import make_spec, parse_workloads
from pgdyno.experiment.tpcc_run import NOPM_METRIC, Counters, TpccWindow, nopm_samples
from pgdyno.pgbench.command import builtin_workload, tpcc_workload, with_tpcc_options
from pgdyno.records import RunCell, RunRecord
from pgdyno.records.health import RunHealth
from pgdyno.records.scripts import ScriptLatency
from pgdyno.records.stored import RunOutcome
from pgdyno.records.tpcc import TpccOptions, TpccResult
from pgdyno.results.encode import to_json, tpcc_json
from pgdyno.results.store import ResultsStore
from pgdyno.stats.analysis import analyse
from pgdyno.stats.tpcc_figures import MINIMUM_SHARE, mix_ok, tpcc_result
from pgdyno.terminal.verdict_tables import ladder_tables

NAMES = ("new_order", "payment", "order_status", "delivery", "stock_level")
WEIGHTS = (45, 43, 4, 4, 4)


def script(number: int, count: int, retries: int | None = 0) -> ScriptLatency:
    return ScriptLatency(
        script=number, transactions=count, failed=1, serialization_failures=0,
        deadlock_failures=1, other_failures=0, skipped=0, retried=retries, retries=retries,
        p50_ms=1.0 + number, p90_ms=2.0 + number, p99_ms=3.0 + number, p999_ms=4.0 + number,
        max_ms=5.0 + number, avg_ms=1.5, min_ms=0.5,
    )  # fmt: skip


def a_result(counts: tuple[int, ...] = (900, 860, 80, 80, 80)) -> TpccResult:
    scripts = [(n, script(i, c)) for i, (n, c) in enumerate(zip(NAMES, counts, strict=True))]
    window = TpccWindow(
        2, TpccOptions(all_warehouses=True), Counters(60_000, 10), Counters(60_891, 2_110), 60.0
    )
    return window.result(scripts, "passed")


def test_nopm_and_tpm_come_from_the_counters_and_rollbacks_from_the_log() -> None:
    result = a_result()
    assert result.nopm == 891.0  # the d_next_o_id increase over one minute
    assert result.tpm == 2_100.0  # commits + rollbacks of the benchmark database
    assert result.rollbacks == 9  # new-order script successes that made no order
    assert result.nopm_per_warehouse == 445.5
    assert result.all_warehouses and not result.keying_thinking
    assert [t.name for t in result.transactions] == list(NAMES)
    assert math.isclose(sum(t.share for t in result.transactions), 1.0)
    assert result.transactions[1].retries == 0 and result.transactions[1].failed == 1
    assert result.consistent and result.mix_ok


def test_a_log_without_retries_counts_none() -> None:
    found = tpcc_result(1, 30.0, 10, None, [("new_order", script(0, 10, retries=None))], "passed")
    assert found.transactions[0].retries == 0 and found.tpm is None and found.nopm == 20.0


def test_the_mix_check_tolerates_chance_but_not_a_wrong_mix() -> None:
    """pgbench draws each script at random by weight: at the specification's weights a run's
    shares scatter around the minimums and must pass; a mix a type short must not."""
    rng = random.Random(7)
    for size in (500, 2_000, 20_000):
        for _ in range(200):
            draws = rng.choices(NAMES, weights=WEIGHTS, k=size)
            assert mix_ok({n: draws.count(n) for n in NAMES}), size
    short = {"new_order": 4_700, "payment": 4_300, "order_status": 200, "delivery": 400,
             "stock_level": 400}  # fmt: skip
    assert not mix_ok(short)  # order-status at 2% of 10,000 where 4% is due
    assert not mix_ok({})
    assert set(MINIMUM_SHARE) == set(NAMES)


def test_per_second_nopm_adds_up_to_the_orders_made() -> None:
    counts = ((100, (10, 9, 1, 1, 1)), (101, (20, 18, 1, 1, 0)), (102, (0, 1, 0, 0, 0)))
    samples = nopm_samples(counts, orders_made=29)  # 30 logged, one rolled back
    assert [(t, metric) for t, metric, _ in samples] == [
        (100, NOPM_METRIC), (101, NOPM_METRIC), (102, NOPM_METRIC)
    ]  # fmt: skip
    assert math.isclose(sum(v for _, _, v in samples) / 60.0, 29.0)
    assert samples[1][2] == pytest.approx(2 * samples[0][2])
    assert nopm_samples(((100, ()),), 5) == []  # a single-script log has no per-script counts


def test_tpcc_json_has_the_issue_shape_and_reads_back_equal(tmp_path: Path) -> None:
    result = a_result()
    blob = tpcc_json(result)
    assert list(blob)[:7] == [
        "warehouses", "nopm", "tpm", "nopm_per_warehouse", "transactions", "mix_ok", "consistency"
    ]  # fmt: skip
    assert set(blob["transactions"]) == set(NAMES)  # type: ignore[arg-type]
    assert set(blob["transactions"]["payment"]) >= {  # type: ignore[index]
        "count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "retries"
    }  # fmt: skip
    json.dumps(blob, allow_nan=False)  # strict JSON
    run = RunRecord(
        cell=RunCell(0, 2, "tpcc", 2, 2, 1), status="ok", started_at="a", finished_at="b",
        duration_s=60, protocol="simple", rate=None, warmup_s=0, pg_version="18.6",
        pgbench_version="18.6", pgbench_argv=(), settings={}, dataset_bytes=None, tpcc=result,
    )  # fmt: skip
    with ResultsStore(tmp_path / "r.sqlite") as store:
        session = store.begin_session(["pgdyno"], "sandbox", {}, {})
        run_id = store.add_run(session, run)
        plain_id = store.add_run(session, replace(run, tpcc=None))
        stored = store.get_run(run_id)
        listed = {row.id: row for row in store.list_runs()}
    assert stored is not None and stored.tpcc == result
    assert to_json(stored)["tpcc"] == blob
    assert listed[run_id].tpcc == result and listed[plain_id].tpcc is None


def outcome(run_id: int, set_name: str, repeat: int, nopm: float) -> RunOutcome:
    tpcc = replace(a_result(), nopm=nopm)
    return RunOutcome(
        run_id, set_name, "ok", "tpcc", 2, 2, repeat, 5_000.0, 10.0, 2.0, RunHealth(), "18",
        None, tpcc,
    )  # fmt: skip


def test_a_comparison_of_tpcc_runs_is_judged_on_nopm_not_tps() -> None:
    """TPS stays the same in every run below; NOPM is 10% higher in set b: the verdict must
    see the NOPM change, and say that is what it measured."""
    runs = []
    for repeat in range(1, 7):
        base = 1_000.0 * (1 + 0.01 * (repeat % 3))
        runs.append(outcome(2 * repeat, "a", repeat, base))
        runs.append(outcome(2 * repeat + 1, "b", repeat, base * 1.10))
    result = analyse(runs, ["a", "b"], "a", "sets").results[1]
    assert result.figure == "nopm"
    assert result.tps_change is not None and result.tps_change.verdict == "better"
    assert result.tps_change.change_pct == pytest.approx(10.0)
    assert result.tps is not None and result.tps.median == pytest.approx(1_111.0, rel=0.02)


def test_a_tpcc_ladder_table_says_nopm() -> None:
    runs = [outcome(3 * r + i, name, r, 1_000.0 * (1 + 0.05 * i))
            for r in range(1, 4) for i, name in enumerate(("a", "b", "c"))]  # fmt: skip
    (table,) = ladder_tables(analyse(runs, ["a", "b", "c"], "a", "ladder"))
    headers = [str(column.header) for column in table.columns]
    assert "NOPM median" in headers and not any("TPS" in h for h in headers)


def test_tpcc_options_and_mixes_are_refused_clearly() -> None:
    assert builtin_workload("tpcc") == tpcc_workload()
    with pytest.raises(UsageError, match="tpcc takes no weight"):
        builtin_workload("tpcc@3")
    with pytest.raises(UsageError, match="cannot join a mix with script files"):
        parse_workloads("tpcc", [str(Path(__file__))])
    with pytest.raises(UsageError, match="cannot share a matrix with pgbench's workloads"):
        make_spec(workloads=parse_workloads("tpcc,select-only", []), scales=[1], clients=[1])
    with pytest.raises(UsageError, match="apply to the tpcc workload only"):
        with_tpcc_options(parse_workloads("select-only", []), TpccOptions(keying_thinking=True))
    (tpcc,) = with_tpcc_options(parse_workloads("tpcc", []), TpccOptions(all_warehouses=True))
    assert tpcc.tpcc == TpccOptions(all_warehouses=True) and tpcc.max_tries == 10
    spec = make_spec(workloads=[tpcc], scales=[2], clients=[2])
    assert spec.dataset == "tpcc"


def test_tpcc_scripts_are_written_before_a_run_can_use_them(tmp_path: Path) -> None:
    workload = tpcc_workload()
    assert all(s.path is None for s in workload.scripts)
    written = workload.with_scripts(tmp_path)
    assert [(s.name, s.weight) for s in written.scripts] == list(zip(NAMES, WEIGHTS, strict=True))
    assert all(s.path is not None and s.path.is_file() for s in written.scripts)
    assert written.tpcc == workload.tpcc
