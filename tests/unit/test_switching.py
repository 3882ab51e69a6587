"""Switching inside one run, the pure parts: which plans qualify (from data/switching.toml and
pg_settings), the plan's design options, the periods' windows and the log router that files
pgbench's transaction lines under them (on log lines in pgbench's own format)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.experiment.matrix import bench_spec
from pgdyno.experiment.switched_run import _LogRouter, padded
from pgdyno.experiment.switching import (
    RELOAD_CONTEXTS,
    PairOrders,
    PlanShape,
    Qualification,
    Window,
    choose_design,
    knowledge,
    measured_window,
    plan_design,
    qualify,
)
from pgdyno.host.knobs import Knob
from pgdyno.pgbench.txlog import summarize
from pgdyno.plan.check import CheckedSet
from pgdyno.plan.load import load_plan
from pgdyno.plan.model import SetSpec, StorageSpec
from pgdyno.postgres.binaries import Binaries
from plans import META, PG17, PG18, bare_plan

ONE_CELL = PlanShape("pgbench", 1, "simple")


def sets(*pgs: dict[str, str], binaries: Binaries = PG18) -> list[CheckedSet]:
    return [CheckedSet(SetSpec(name=f"s{i}"), binaries, dict(pg)) for i, pg in enumerate(pgs)]


def test_reload_settings_that_act_at_once_qualify():
    found = qualify(sets({"log_min_duration_statement": "-1"},
                         {"log_min_duration_statement": "100000"}), META, ONE_CELL)  # fmt: skip
    assert found == Qualification(True, "every set changes only reload settings that act at once")
    same = qualify(sets({}, {}), META, ONE_CELL)  # an A/A: nothing differs
    assert same.inside
    sync = qualify(sets({"synchronous_commit": "on"}, {"synchronous_commit": "off"}), META,
                   ONE_CELL)  # fmt: skip
    assert sync.inside


@pytest.mark.parametrize(
    ("pg", "words"),
    [
        ({"max_wal_size": "4GB"}, "max_wal_size acts over minutes"),
        ({"checkpoint_timeout": "15min"}, "checkpoint_timeout acts over minutes"),
        ({"autovacuum_naptime": "10s"}, "autovacuum_naptime acts over minutes"),
        ({"bgwriter_delay": "10ms"}, "bgwriter_delay acts over minutes"),
        ({"shared_buffers": "1GB"}, "shared_buffers needs a restart (pg_settings context"),
        ({"no_such_setting": "1"}, "no_such_setting is not a setting this server describes"),
    ],
)  # fmt: skip
def test_the_first_setting_that_does_not_switch_is_named(pg: dict[str, str], words: str):
    found = qualify(sets({"work_mem": "4MB"}, {"work_mem": "8MB", **pg}), META, ONE_CELL)
    assert not found.inside
    assert found.reason.startswith(words), found.reason


def test_a_carry_over_names_its_reason_and_evidence():
    found = qualify(sets({}, {"max_wal_size": "4GB"}), META, ONE_CELL)
    rule = next(r for r in knowledge().carry_over if r.name == "max_wal_size")
    assert rule.reason in found.reason and rule.evidence in found.reason


def test_planner_settings_switch_except_for_prepared_statements():
    planner = sets({}, {"enable_indexscan": "off", "random_page_cost": "1.1"})
    assert qualify(planner, META, ONE_CELL).inside
    prepared = qualify(planner, META, PlanShape("pgbench", 1, "prepared"))
    assert not prepared.inside
    assert prepared.reason.startswith("enable_indexscan does not reach prepared statements")


def test_sets_that_need_their_own_server_or_host_do_not_switch(tmp_path: Path):
    versions = [*sets({}), *sets({}, binaries=PG17)]
    assert qualify(versions, META, ONE_CELL).reason == (
        "the sets run different PostgreSQL versions, each on its own server"
    )
    storage = [*sets({}), CheckedSet(SetSpec(name="fs", storage=StorageSpec(filesystem="xfs")),
                                     PG18, {})]  # fmt: skip
    assert "filesystem of its own" in qualify(storage, META, ONE_CELL).reason
    knob = Knob.sysctl("vm.dirty_expire_centisecs", proc_root=Path("/proc"), sys_root=Path("/sys"))
    host = [*sets({}), CheckedSet(SetSpec(name="h"), PG18, {}, [(knob, "1500")])]
    assert qualify(host, META, ONE_CELL).reason.startswith(
        "sysctl vm.dirty_expire_centisecs is a host setting not known to take effect"
    )


def test_the_matrix_must_be_one_pgbench_cell():
    found = qualify(sets({}, {}), META, PlanShape("pgbench", 2, "simple"))
    assert "the matrix has 2 cells" in found.reason
    assert "TPC-C" in qualify(sets({}, {}), META, PlanShape("tpcc", 1, "simple")).reason


def test_every_entry_of_the_knowledge_names_real_settings_with_evidence():
    """Each rule matches at least one setting PostgreSQL 18 has, whose context a reload would
    otherwise switch (a rule for a restart-only setting would be dead), and cites a page."""
    known = knowledge()
    assert known.sysctls == frozenset()  # none yet: conservative (see the data file)
    for rule in (*known.carry_over, *known.prepared):
        assert re.fullmatch(r"https://www\.postgresql\.org/docs/current/\S+", rule.evidence)
        assert rule.reason
        matched = [m for name, m in META.items() if rule.matches(name)]
        assert matched, rule.name
        if rule.name != "shared_preload_libraries":
            assert any(m.context in RELOAD_CONTEXTS for m in matched), rule.name


def test_the_design_option():
    yes, no = Qualification(True, "fine"), Qualification(False, "max_wal_size acts over minutes")
    assert choose_design("auto", yes).inside and not choose_design("auto", no).inside
    assert not choose_design("runs", yes).inside
    with pytest.raises(UsageError, match="cannot switch this plan inside one run: max_wal_size"):
        choose_design("inside", no)


@pytest.mark.parametrize(
    ("matrix", "words"),
    [
        ({"period": 2, "burn_in": 1.5}, "a period of 2 s with a burn-in of 1.5 s leaves no whole"),
        ({"period": 7, "burn_in": 7}, "give a period of at least 8 s"),
        ({"design": "sometimes"}, "input should be 'auto', 'inside', 'runs' or 'twins'"),
        ({"period": 1}, "period"),
        ({"burn_in": -1}, "burn_in"),
    ],
)
def test_bad_period_options_are_one_sentence(
    tmp_path: Path, matrix: Mapping[str, object], words: str
):
    path = tmp_path / "p.toml"
    path.write_text(bare_plan(**matrix))
    with pytest.raises(UsageError) as caught:
        load_plan(path)
    message = str(caught.value)
    assert words in message and "\n" not in message, message


def test_orders_within_rounds_are_drawn_from_the_seed():
    orders = [tuple(PairOrders(11).order("ab", r)) for r in range(1, 41)]
    assert orders == [tuple(PairOrders(11).order("ab", r)) for r in range(1, 41)]
    assert 10 < orders.count(("a", "b")) < 30  # a fair coin: both orders, neither always
    assert orders != [tuple(PairOrders(12).order("ab", r)) for r in range(1, 41)]


def test_a_period_measures_the_whole_seconds_after_its_burn_in():
    window = measured_window(1000.3, 1010.4, 2.0)
    assert window == Window(1003, 1009) and window.seconds == 7
    assert not window.holds(1002) and window.holds(1003) and not window.holds(1010)


def line(client: int, epoch: int, us: int, latency_us: int = 1500) -> str:
    """One line of pgbench's per-transaction log (pgbench 15+, one script)."""
    return f"{client} 1 {latency_us} 0 {epoch} {us}\n"


def test_the_router_files_complete_lines_under_their_period(tmp_path: Path):
    """Lines of the burn-in and between periods go nowhere; a line cut short at the end of a
    read waits for the next read, and the final read drops it (and cuts it from the file,
    for the whole run's reading)."""
    run_dir, out = tmp_path / "run", tmp_path / "periods"
    run_dir.mkdir()
    router = _LogRouter(run_dir, out)
    router.windows = {1: Window(100, 101), 2: Window(104, 105)}
    one = run_dir / "tx.77"
    two = run_dir / "tx.77.1"
    one.write_text(line(0, 99, 5) + line(0, 100, 5) + line(0, 101, 7) + "0 1 15")
    two.write_text(line(1, 100, 9) + line(1, 102, 1))
    router.read()
    assert router.logged_through() == 101  # the slower thread's file: 101, the other at 102
    with one.open("a") as f:
        f.write("00 0 104 3\n" + line(0, 105, 1) + "0 2 ")
    router.read(final=True)
    assert one.read_text().endswith(line(0, 105, 1))  # the cut line is gone
    rows, total = summarize(router.files(1))
    assert (total.transactions, [r.t for r in rows]) == (3, [100, 101])
    _, second = summarize(router.files(2))
    assert second.transactions == 2  # the line completed by the second read counts
    padded_rows = padded(rows, Window(100, 101))
    assert [r.t for r in padded_rows] == [99, 100, 101, 102]


def test_the_router_gives_each_period_the_numbers_before_it(tmp_path: Path):
    """A sampled log: each period's transactions are counted from pgbench's per-client
    numbers, from the number each client had reached before the period (lines of the burn-in
    included), so a period counts exactly what ended in it."""
    run_dir, out = tmp_path / "run", tmp_path / "periods"
    run_dir.mkdir()
    router = _LogRouter(run_dir, out)
    router.windows = {1: Window(100, 100), 2: Window(102, 102)}
    numbered = [(0, 40, 99), (0, 90, 100), (0, 130, 100), (0, 170, 101), (0, 230, 102)]
    (run_dir / "tx.5").write_text("".join(f"{c} {n} 900 0 {t} 5\n" for c, n, t in numbered))
    (run_dir / "tx.5.1").write_text("1 60 900 0 102 7\n")  # client 1's first line is here
    router.read(final=True)
    assert router.numbers_before(1) == {0: 40} and router.numbers_before(2) == {0: 170}
    _, first = summarize(router.files(1), 0.05, numbers_before=router.numbers_before(1))
    assert first.transactions == 130 - 40
    _, second = summarize(router.files(2), 0.05, numbers_before=router.numbers_before(2))
    # client 0: 230 - 170 = 60 for its one line; client 1's line has no number before it, so
    # it stands for what client 0's numbered line did
    assert second.transactions == 120


def design_of(
    tmp_path: Path, matrix: Mapping[str, object], refusal: str | None = None, **pg: str
) -> str:
    path = tmp_path / "p.toml"
    path.write_text(bare_plan(**matrix))
    loaded = load_plan(path)
    checked = sets({}, dict(pg))
    return plan_design(loaded, checked, lambda _: META, bench_spec(loaded, 2), refusal).note()


def test_auto_switches_adaptive_rounds_of_a_qualifying_plan_only(tmp_path: Path):
    adaptive = {"precision": 2.0}
    assert design_of(tmp_path, adaptive, work_mem="8MB") == (
        "design: switching inside runs: every set changes only reload settings that act at once"
    )
    assert design_of(tmp_path, adaptive, max_wal_size="2GB").startswith(
        "design: one run per set and round: max_wal_size acts over minutes"
    )
    assert design_of(tmp_path, {"repeats": 3}, work_mem="8MB").startswith(
        "design: one run per set and round: a fixed number of repeats asks for runs"
    )
    assert design_of(tmp_path, {"repeats": 3, "design": "inside"}, work_mem="8MB").startswith(
        "design: switching inside runs"
    )
    assert design_of(tmp_path, adaptive, "--resume goes on with one run per set and round") == (
        "design: one run per set and round: --resume goes on with one run per set and round"
    )
    with pytest.raises(UsageError, match='"inside" cannot switch inside one run: --resume'):
        design_of(tmp_path, {"precision": 2.0, "design": "inside"}, "--resume goes on ...")
    with pytest.raises(UsageError, match=r"p\.toml line \d+ \(matrix\.design\): .*max_wal_size"):
        design_of(tmp_path, {"precision": 2.0, "design": "inside"}, max_wal_size="2GB")
