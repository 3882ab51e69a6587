"""Twin servers, the pure parts: which plans qualify (a setting that needs a restart, one version
and storage, no host setting that differs, the pgbench dataset, the memory rule of
data/twins.toml), the design `auto` and `twins` choose and the sentence that says why, and the
idle twins' share summed from the runs' events."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pgdyno.experiment.matrix import bench_spec
from pgdyno.experiment.twin_sets import (
    IDLE_EVENT,
    MemoryRule,
    choose,
    idle_shares,
    memory_rule,
    memory_shortfall,
    qualify_twins,
)
from pgdyno.host.knobs import Knob
from pgdyno.plan.check import CheckedSet
from pgdyno.plan.load import load_plan
from pgdyno.plan.model import SetSpec, StorageSpec
from pgdyno.postgres.binaries import Binaries
from pgdyno.records import Event
from plans import META, PG17, PG18, bare_plan

GIB = 1024**3
MIB = 1024**2
RAM = 8 * GIB  # memory of the host in these tests
SWAPPINESS = Knob("sysctl", "vm.swappiness", proc_root=Path("/x"), sys_root=Path("/y"))


def sets(*pgs: dict[str, str], binaries: Binaries = PG18) -> list[CheckedSet]:
    return [CheckedSet(SetSpec(name=f"s{i}"), binaries, dict(pg)) for i, pg in enumerate(pgs)]


def test_the_memory_rule_is_data():
    rule = memory_rule()
    assert 0 < rule.headroom < 1 and rule.server_bytes > 0


def test_servers_fit_when_all_of_them_stay_under_the_memory_less_the_headroom():
    rule = MemoryRule(0.25, 64 * MIB)
    # 2 x (2.5 GiB + 64 MiB) + 2 x 100 MiB dataset < 6 GiB
    assert memory_shortfall([5 * GIB // 2] * 2, 100 * MIB, RAM, rule) is None
    # 2 x (3 GiB + 64 MiB): over 6 GiB
    short = memory_shortfall([3 * GIB] * 2, 0, RAM, rule)
    assert short == (
        "not enough memory for 2 servers with shared_buffers 3GB + 3GB (RAM 8 GiB, 25% headroom)"
    )
    assert memory_shortfall([128 * MIB] * 3, 2 * GIB, RAM, rule) is not None  # 3 dataset copies


def test_a_restart_setting_qualifies_when_the_servers_fit():
    found = qualify_twins(sets({"shared_buffers": "128MB"}, {"shared_buffers": "256MB"}), META,
                          RAM, 20 * MIB)  # fmt: skip
    assert found.fits and found.restart
    assert found.reason.startswith("shared_buffers needs a restart; the 2 servers fit")


@pytest.mark.parametrize(
    ("checked", "words", "restart"),
    [
        (sets({"work_mem": "4MB"}, {"work_mem": "8MB"}),
         "no setting that differs between the sets needs a restart", False),
        (sets({}, {})[:1] + sets({"max_connections": "50"}, binaries=PG17),
         "the sets run different PostgreSQL versions", True),
        ([CheckedSet(SetSpec(name="a"), PG18, {}),
          CheckedSet(SetSpec(name="b", storage=StorageSpec(filesystem="xfs")), PG18,
                     {"shared_buffers": "256MB"})],
         "set b puts the data on a filesystem of its own", True),
        ([CheckedSet(SetSpec(name="a"), PG18, {}, [(SWAPPINESS, "10")]),
          CheckedSet(SetSpec(name="b"), PG18, {"wal_buffers": "16MB"})],
         "the sets change host settings", True),
        (sets({}, {"shared_buffers": "7GB"}),
         "not enough memory for 2 servers with shared_buffers 128MB + 7GB", True),
    ],
)  # fmt: skip
def test_what_keeps_a_plan_off_twins_is_said(checked: list[CheckedSet], words: str, restart: bool):
    found = qualify_twins(checked, META, RAM, 0)
    assert not found.fits and found.restart == restart
    assert found.reason.startswith(words), found.reason


def test_the_tpcc_dataset_does_not_run_on_twins():
    found = qualify_twins(sets({}, {"shared_buffers": "256MB"}), META, RAM, 0, dataset="tpcc")
    assert not found.fits and "generated at random on each server" in found.reason


def design_of(
    tmp_path: Path, matrix: Mapping[str, object], *refusals: str | None, **pg: str
) -> str:
    path = tmp_path / "p.toml"
    path.write_text(bare_plan(**matrix))
    loaded = load_plan(path)
    checked = sets({}, dict(pg))
    spec = bench_spec(loaded, 2)
    return choose(loaded, checked, lambda _: META, spec, (RAM, 20 * MIB), *refusals).note()


def test_auto_picks_twins_for_a_restart_setting_and_says_why_not_otherwise(tmp_path: Path):
    twins = "design: twin servers (one per set, each started once; one run per set and round): "
    for matrix in ({"repeats": 3}, {"precision": 2.0}, {"repeats": 3, "design": "twins"}):
        assert design_of(tmp_path, matrix, shared_buffers="256MB").startswith(
            twins + "shared_buffers needs a restart"
        ), matrix
    assert design_of(tmp_path, {"repeats": 3}, shared_buffers="7GB").startswith(
        "design: one run per set and round: twins: not enough memory for 2 servers"
    )
    assert design_of(tmp_path, {"repeats": 3, "design": "twins"}, shared_buffers="7GB").startswith(
        "design: one run per set and round: twins: not enough memory for 2 servers"
    )
    # A reload setting: switching inside one run (adaptive), else runs as before twins
    assert design_of(tmp_path, {"precision": 2.0}, work_mem="8MB").startswith(
        "design: switching inside runs"
    )
    assert design_of(tmp_path, {"repeats": 3}, work_mem="8MB").startswith(
        "design: one run per set and round: a fixed number of repeats"
    )
    assert design_of(tmp_path, {"repeats": 3, "design": "twins"}, work_mem="8MB") == (
        "design: one run per set and round: twins: no setting that differs between the sets "
        "needs a restart"
    )
    assert design_of(tmp_path, {"repeats": 3, "design": "runs"}, shared_buffers="256MB") == (
        'design: one run per set and round: the plan asks for it: design = "runs"'
    )


def test_resume_and_an_existing_server_keep_one_server(tmp_path: Path):
    resume = "--resume goes on with one run per set and round"
    assert design_of(tmp_path, {"repeats": 3}, resume, shared_buffers="256MB") == (
        f"design: one run per set and round: twins: {resume}"
    )
    dsn = "the comparison runs on one existing server (--dsn)"
    assert design_of(tmp_path, {"repeats": 3}, None, dsn, shared_buffers="256MB") == (
        f"design: one run per set and round: twins: {dsn}"
    )


def test_the_idle_share_sums_each_sets_runs():
    def idle(cpu: float, wall: float, checkpoints: int = 0) -> Event:
        return Event(0.0, IDLE_EVENT, {"cpu_s": cpu, "wall_s": wall, "checkpoints": checkpoints})

    other = Event(0.0, "checkpoint_start", {})
    # runs 1 and 3 of set a (two idle twins beside run 1: its wall time counts once)
    shares = idle_shares([(1, "a", idle(0.1, 4.0)), (1, "a", idle(0.3, 4.0, 1)),
                          (2, "b", idle(0.05, 5.0)), (3, "a", idle(0.2, 4.0)),
                          (3, "a", other)])  # fmt: skip
    a, b = shares
    assert (a.set_name, a.runs, a.checkpoints) == ("a", 2, 1)
    assert a.cpu_s == pytest.approx(0.6) and a.wall_s == pytest.approx(8.0)
    assert a.cpu_share == pytest.approx(0.075)
    assert b.line().startswith("Idle twin used 1.0% of a CPU during the runs of b")
