"""`pgdyno noise` on the real sandbox and real pgbench: an A/A calibration.

Whether runs are flagged depends on what else the host runs, so each test makes its condition
(tests/host_conditions.py): pgdyno in a PID namespace of its own, where it sees no foreign CPU,
for the figures; a CPU hog beside every run for the flagged path."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import one_clear_sentence, pgdyno_process
from host_conditions import cpu_hog, no_steal, quiet_pgdyno


def strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def stored_interference(run_cli, workdir: Path, run_ids: list[int]) -> list[dict | None]:
    """What `runs show --json` stored of each run's interference."""
    found = []
    for run_id in run_ids:
        shown = strict(run_cli(workdir, "runs", "show", str(run_id), "--json").stdout)
        assert isinstance(shown, dict)
        found.append(shown["interference"])
    return found


@pytest.fixture(scope="module")
def calibration(quiet_workdir: Path) -> dict:
    """One 40 s calibration for the tests below, with no run flagged (pgdyno sees only itself)."""
    args = ("noise", "--pg-version", "18", "--budget", "40s", "--seconds", "2", "--json")
    result = quiet_pgdyno(quiet_workdir, *args)
    assert result.code == 0, result.stderr
    report = strict(result.stdout)
    assert isinstance(report, dict)
    return report


def test_runs_are_stored_as_a_bench_session(calibration, run_cli, quiet_workdir: Path):
    runs = calibration["runs"]
    assert runs >= 6 and runs % 2 == 0  # pairs, at least three
    assert calibration["run_ids"] and len(calibration["run_ids"]) == runs
    assert calibration["failed_run_ids"] == []
    assert (calibration["workload"], calibration["duration_s"]) == ("select-only", 2)
    assert calibration["clients"] >= 1 and calibration["budget_s"] == 40.0
    listed = strict(run_cli(quiet_workdir, "runs", "list", "--json").stdout)
    assert isinstance(listed, list)
    mine = [r for r in listed if r["session_id"] == calibration["session_id"]]
    assert sorted(r["id"] for r in mine) == calibration["run_ids"]
    assert all(r["status"] == "ok" and r["tps"] > 0 for r in mine)


def test_no_run_flagged_when_nothing_else_is_seen(calibration, run_cli, quiet_workdir: Path):
    stored = stored_interference(run_cli, quiet_workdir, calibration["run_ids"])
    no_steal(stored)
    assert (calibration["flagged"], calibration["used"]) == (0, calibration["runs"])
    assert calibration["top_foreign"] == []


def test_a_cpu_hog_flags_every_run_and_leaves_no_figures(run_cli, shared_workdir: Path):
    """pgdyno runs as its own process; the hog beside it is not its descendant: foreign."""
    args = ("noise", "--pg-version", "18", "--budget", "1s", "-T", "1", "-c", "1", "--json",
            "--workdir", str(shared_workdir))  # fmt: skip
    with cpu_hog(), pgdyno_process(*args) as proc:
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    report = strict(stdout)
    assert isinstance(report, dict)
    runs = report["runs"]
    assert runs == 6 and (report["flagged"], report["used"], report["pairs"]) == (runs, 0, 0)
    stored = stored_interference(run_cli, shared_workdir, report["run_ids"])
    assert all(found is not None and found["foreign_cpu_pct"] > 5.0 for found in stored), stored
    top = report["top_foreign"]
    assert top and top[0]["cpu_pct"] > 5.0, top
    assert any(t["command"].startswith("python") and t["runs"] == runs for t in top), top
    assert report["resolve"] == [] and report["conclusion"].startswith("too few"), report


def test_figures_are_present_and_sane(calibration):
    assert calibration["cv_all_pct"] > 0
    assert calibration["run_seconds"] >= 2.0  # the run itself, overhead on top
    assert calibration["round_seconds"] == pytest.approx(2 * calibration["run_seconds"])
    assert calibration["drift_method"] == "scipy.stats.theilslopes"
    assert calibration["pairs"] >= 3  # no run flagged: every pair counts
    assert calibration["cv_pct"] > 0 and calibration["pair_sd_pct"] > 0
    assert calibration["drift_low_pct"] <= calibration["drift_pct_per_min"]
    assert calibration["drift_pct_per_min"] <= calibration["drift_high_pct"]
    rows = calibration["resolve"]
    assert [r["target"] for r in rows] == ["10%", "5%", "2%"]
    seconds = [r["seconds"] for r in rows]
    capped = [r["capped"] for r in rows]
    assert seconds[0] <= seconds[1] <= seconds[2]
    assert capped == sorted(capped)  # a finer target is capped whenever a coarser one is
    # equal only when even 10% needs the most rounds forecast (a host as noisy as CI's once)
    assert seconds[0] < seconds[2] or capped[0], rows
    for row in rows:
        assert row["seconds"] == pytest.approx(row["rounds"] * calibration["round_seconds"])
    assert calibration["precision"]["target"] == "+-2%" and calibration["precision"]["rounds"] >= 2
    assert calibration["conclusion"].startswith("this host resolves 10% in ")


def test_text_fits_one_screen_with_at_least_six_runs(quiet_workdir: Path):
    result = quiet_pgdyno(
        quiet_workdir, "noise", "--pg-version", "18", "--budget", "1s", "-T", "1", "-c", "1",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 40, result.stdout
    assert lines[0] == "noise calibration (A/A)"
    assert any(line.startswith("runs ") and " 6 (" in line for line in lines), result.stdout
    with sqlite3.connect(quiet_workdir / "results.sqlite") as db:
        stored = db.execute(
            "SELECT interference FROM runs WHERE session_id = (SELECT max(session_id) FROM runs)"
        ).fetchall()
    assert len(stored) == 6
    no_steal([json.loads(text) if text else None for (text,) in stored])
    assert any(line.startswith("this host resolves") for line in lines), result.stdout
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
