"""`plan preview`: what `pgdyno plan check` shows, as one frozen record built without the CLI
(the command only renders it), changing nothing on the way."""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import pytest

from pgdyno.environment import Environment, ResultsLocation
from pgdyno.experiment.switching import plan_slow_settings
from pgdyno.lab.plan_preview import PlanPreview, preview_plan
from pgdyno.plan.load import load_plan
from pgdyno.plan.policy import Allowed
from plans import tiny_plan

PLAN = tiny_plan("preview", clients=[1, 2], repeats=3)


def environment(workdir: Path, cache: Path) -> Environment:
    return Environment(
        data_dir=workdir, cache_dir=cache, results=ResultsLocation(workdir / "results.sqlite"),
        env={"PGDYNO_CACHE_DIR": str(cache)}, stdout=io.StringIO(), stderr=io.StringIO(),
        is_root=os.geteuid() == 0,
    )  # fmt: skip


def listing(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots for p in root.rglob("*"))


def test_the_preview_is_a_frozen_record_of_sets_datasets_and_duration(tmp_path: Path) -> None:
    workdir, cache = tmp_path / "work", tmp_path / "cache"
    workdir.mkdir()
    cache.mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    before = listing(workdir, cache)

    preview = preview_plan(environment(workdir, cache), plan, Allowed.of((), ()))

    assert isinstance(preview, PlanPreview)
    assert preview.name == "preview"
    assert [(s.name, s.baseline) for s in preview.sets] == [("a", True), ("b", False)]
    assert dict(preview.sets[1].pg)["work_mem"] == "8MB"
    assert not preview.has_storage and all(s.storage == "-" for s in preview.sets)
    assert len(preview.datasets) == 1 and preview.datasets[0].startswith("dataset pgbench: scale")
    # 1 workload x 1 scale x 2 client counts x 3 repeats, for each of the 2 sets
    assert (preview.duration.runs, preview.duration.mode) == (12, "sets")
    assert preview.duration.adaptive is None
    # which design orders the rounds, and why (issue 33)
    assert preview.orders.startswith("orders: balanced design (ABBA blocks)")
    with pytest.raises(dataclasses.FrozenInstanceError):
        preview.name = "other"  # type: ignore[misc]
    assert listing(workdir, cache) == before  # nothing created, nothing installed


def test_plan_check_prints_the_plans_seed(tmp_path: Path, run_cli) -> None:
    """A plan with `[matrix] seed` fixes the orders every compare of it draws: `plan check`
    says the seed beside the design (issue 33: the plan check says which design runs); without
    one it names no seed."""
    workdir = tmp_path / "work"
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan("preview", clients=[1, 2], repeats=3, seed=8086))
    preview = preview_plan(environment(workdir, tmp_path / "cache"), plan, Allowed.of((), ()))
    assert preview.seed == 8086
    shown = run_cli(workdir, "plan", "check", str(plan))
    assert shown.code == 0, shown.stderr
    assert "orders: balanced design" in shown.stdout
    assert "seed: 8086 (the plan's [matrix] seed)" in " ".join(shown.stdout.split())
    plan.write_text(PLAN)
    assert "seed:" not in run_cli(workdir, "plan", "check", str(plan)).stdout


def test_plan_check_says_what_drops_the_seconds_after_each_switch(tmp_path: Path, run_cli) -> None:
    """The burn-in after each set switch is the unmeasured warm-up each run starts with once
    its set is in effect (issue 33 §1): `plan check` says it, and says when a plan has none."""
    workdir = tmp_path / "work"
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)  # warmup = 0
    shown = " ".join(run_cli(workdir, "plan", "check", str(plan)).stdout.split())
    assert "Burn-in: none ([matrix] warmup = 0)" in shown
    plan.write_text(tiny_plan("preview", clients=[1, 2], repeats=3, warmup=7))
    shown = " ".join(run_cli(workdir, "plan", "check", str(plan)).stdout.split())
    assert "Burn-in: every run started with 7 s of unmeasured load after its set was put" in shown


def test_plan_check_says_the_sets_are_compared_on_capacity(tmp_path: Path, run_cli) -> None:
    """`[matrix] capacity_p99` (issue 34 §1): `plan check` says every set is swept on capacity
    and how (target, steps, confidence, each set's share of the budget); a plan that cannot be
    swept is refused in one sentence at its line, exit 2, no traceback."""
    workdir = tmp_path / "work"
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan("cap", capacity_p99="5ms", capacity_budget="2m",
                              capacity_step=5, capacity_repeats=3))  # fmt: skip
    shown = run_cli(workdir, "plan", "check", str(plan))
    assert shown.code == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "capacity: after the TPS rounds every set is swept at p99 <= 5 ms (5 s steps" in text
    assert ">= 75% confidence), 60 s of steps a set (capacity_budget 2 min in all)" in text
    plan.write_text(PLAN)
    assert "capacity:" not in run_cli(workdir, "plan", "check", str(plan)).stdout
    refusals = {
        "sweeps one cell and this matrix has 2": tiny_plan("cap", clients=[1, 2],
                                                             capacity_p99="5ms"),
        "'fast' is not a latency": tiny_plan("cap", capacity_p99="fast"),
        "holds fewer than 2 steps": tiny_plan("cap", capacity_p99="5ms", capacity_budget="20s"),
    }  # fmt: skip
    for said, text in refusals.items():
        plan.write_text(text)
        refused = run_cli(workdir, "plan", "check", str(plan))
        assert refused.code == 2 and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) <= 2


def test_plan_check_says_what_short_runs_cannot_show(tmp_path: Path, run_cli) -> None:
    """Seed 004's ladder on 20 s runs changes checkpoint settings, which act over minutes: `plan
    check` names them and the run length that would show what they do (issue 33: a step left
    unresolved has a stated reason); with runs of 300 s it says nothing of them."""
    workdir = tmp_path / "work"
    example = (Path(__file__).parents[2] / "examples" / "004-tpcc-ladder.toml").read_text()
    plan = tmp_path / "ladder.toml"
    plan.write_text(example)
    shown = run_cli(workdir, "plan", "check", str(plan))
    assert shown.code == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "runs of 20 s and settings that act over minutes: checkpoint_completion_target (" in text
    assert "checkpoint_timeout, max_wal_size. A run this short" in text
    assert "runs of at least 300 s (duration) would show what they do" in text
    # compare prints the same under its verdicts (and `slow_settings` in its JSON)
    said = plan_slow_settings(load_plan(plan))
    assert said is not None and " ".join(said.split()) in text
    plan.write_text(example.replace("duration = 20\n", "duration = 300\n"))
    longer = run_cli(workdir, "plan", "check", str(plan))
    assert longer.code == 0 and "act over minutes" not in longer.stdout, longer.stdout
    assert plan_slow_settings(load_plan(plan)) is None
