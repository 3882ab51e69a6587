"""`pgdyno noise` in-process, on the real sandbox and real pgbench: an A/A calibration."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from conftest import make_env, one_clear_sentence
from pgdyno.cli import main


def strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def calibration(cache_dir: Path, shared_workdir: Path) -> dict:
    """One 40 s calibration for the tests below (conftest's run_cli is per test)."""
    env = make_env(shared_workdir, cache_dir)
    args = ["noise", "--pg-version", "18", "--budget", "40s", "--seconds", "2", "--json"]
    code = main(args, env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    assert code == 0, env.stderr.getvalue()
    report = strict(env.stdout.getvalue())
    assert isinstance(report, dict)
    return report


def test_runs_are_stored_as_a_bench_session(calibration, run_cli, shared_workdir: Path):
    runs = calibration["runs"]
    assert runs >= 6 and runs % 2 == 0  # pairs, at least three
    assert calibration["run_ids"] and len(calibration["run_ids"]) == runs
    assert calibration["failed_run_ids"] == []
    assert (calibration["workload"], calibration["duration_s"]) == ("select-only", 2)
    assert calibration["clients"] >= 1 and calibration["budget_s"] == 40.0
    listed = strict(run_cli(shared_workdir, "runs", "list", "--json").stdout)
    assert isinstance(listed, list)
    mine = [r for r in listed if r["session_id"] == calibration["session_id"]]
    assert sorted(r["id"] for r in mine) == calibration["run_ids"]
    assert all(r["status"] == "ok" and r["tps"] > 0 for r in mine)


def test_flagged_runs_are_those_stored_with_interference(calibration, run_cli, shared_workdir):
    flagged = 0
    for run_id in calibration["run_ids"]:
        shown = strict(run_cli(shared_workdir, "runs", "show", str(run_id), "--json").stdout)
        assert isinstance(shown, dict)
        flagged += shown["interference"] is not None
    assert calibration["flagged"] == flagged
    assert calibration["used"] == calibration["runs"] - flagged
    if flagged:
        assert calibration["top_foreign"] and calibration["top_foreign"][0]["cpu_pct"] > 0


def test_figures_are_present_and_sane(calibration):
    assert calibration["cv_all_pct"] > 0
    assert calibration["run_seconds"] >= 2.0  # the run itself, overhead on top
    assert calibration["round_seconds"] == pytest.approx(2 * calibration["run_seconds"])
    assert calibration["drift_method"] == "scipy.stats.theilslopes"
    if calibration["pairs"] < 2:
        assert calibration["resolve"] == [] and calibration["conclusion"].startswith("too few")
        pytest.skip(
            f"host too busy for figures: {calibration['flagged']} of {calibration['runs']} "
            "runs flagged for interference"
        )
    assert calibration["cv_pct"] > 0 and calibration["pair_sd_pct"] > 0
    assert calibration["drift_low_pct"] <= calibration["drift_pct_per_min"]
    assert calibration["drift_pct_per_min"] <= calibration["drift_high_pct"]
    rows = calibration["resolve"]
    assert [r["target"] for r in rows] == ["10%", "5%", "2%"]
    seconds = [r["seconds"] for r in rows]
    assert seconds[0] <= seconds[1] <= seconds[2] and seconds[0] < seconds[2]
    for row in rows:
        assert row["seconds"] == pytest.approx(row["rounds"] * calibration["round_seconds"])
    assert calibration["precision"]["target"] == "+-2%" and calibration["precision"]["rounds"] >= 2
    assert calibration["conclusion"].startswith("this host resolves 10% in ")


def test_text_fits_one_screen_with_at_least_six_runs(run_cli, shared_workdir: Path):
    result = run_cli(
        shared_workdir, "noise", "--pg-version", "18", "--budget", "1s", "-T", "1", "-c", "1",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 40, result.stdout
    assert lines[0] == "noise calibration (A/A)"
    assert any(line.startswith("runs ") and " 6 (" in line for line in lines), result.stdout
    assert any(line.startswith(("this host resolves", "too few clean runs")) for line in lines), (
        result.stdout
    )
    assert "results database: " in lines[-1]
    assert result.stderr.count("select-only scale") == 6  # one progress line per run


@pytest.mark.parametrize(
    "budget, words",
    [("20", "is not a duration"), ("0s", "no time at all"), ("3 fortnights", "not a duration")],
)
def test_a_bad_budget_is_one_sentence(run_cli, workdir: Path, budget: str, words: str):
    result = run_cli(workdir, "noise", "--budget", budget)
    assert result.code == 2
    line = one_clear_sentence(result.stderr)
    assert "--budget" in line and words in line
    assert not (workdir / "clusters").exists()  # refused before any sandbox


def test_noise_runs_one_scale(run_cli, workdir: Path):
    result = run_cli(workdir, "noise", "-s", "small,medium")
    assert result.code == 2
    assert "noise runs one" in one_clear_sentence(result.stderr)
