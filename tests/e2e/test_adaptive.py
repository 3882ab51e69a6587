"""Adaptive rounds (issue 13) on a real sandbox with real pgbench: `compare --precision/--budget`,
`bench --repeats auto`, and an A/A comparison with a real CPU hog beside it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

from conftest import one_clear_sentence, pgdyno_process, wait_for

MATRIX = """
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = {seconds}
warmup = 0
{rounds}
"""


def plan(directory: Path, rounds: str, seconds: int = 1) -> Path:
    path = directory / "aa.toml"
    body = MATRIX.format(seconds=seconds, rounds=rounds)
    path.write_text(f'name = "aa"\n{textwrap.dedent(body)}\n[[set]]\nname = "a"\n[[set]]\n'
                    'name = "b"\n')  # fmt: skip
    return path


def b_change(data: dict[str, object]) -> dict[str, object]:
    results = data["analysis"]["results"]  # type: ignore[index]
    return next(r for r in results if r["set_name"] == "b")["tps_change"]  # type: ignore[no-any-return]


def test_adaptive_aa_stops_when_resolved_with_rotated_rounds(
    run_cli, shared_workdir: Path, tmp_path: Path
):
    aa = plan(tmp_path, 'precision = 30.0\nbudget = "4m"')
    result = run_cli(shared_workdir, "compare", str(aa), "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    rounds = data["rounds"]
    assert rounds["mode"] == "adaptive" and rounds["precision_pct"] == 30.0
    assert rounds["budget_s"] == 240.0
    # The always-valid interval is unbounded before 5 rounds: no verdict, no stop, before that.
    assert rounds["rounds"] >= 5 or rounds["stopped"] == "budget"
    order = rounds["order"]
    assert order[:3] == [["a", "b"], ["b", "a"], ["a", "b"]]
    runs = data["runs"]
    assert [r["set_name"] for r in runs[:4]] == ["a", "b", "b", "a"]
    assert data["comparison"]["rounds"] == rounds  # stored with the comparison
    change = b_change(data)
    if rounds["stopped"] == "resolved":
        assert change["method"] == "sequential"
        assert (change["ci_high_pct"] - change["ci_low_pct"]) / 2 <= 30.0 or change[
            "verdict"
        ] != "no detectable difference"
    assert change["verdict"] == "no detectable difference"  # A/A


def test_budget_spent_says_how_much_longer(run_cli, shared_workdir: Path, tmp_path: Path):
    aa = plan(tmp_path, "")
    result = run_cli(shared_workdir, "compare", str(aa), "--precision", "0.05", "--budget", "5s")
    assert result.code == 0, result.stderr
    assert "2 rounds (adaptive)" in result.stdout
    assert "the budget of 0.1 min is spent with 1 interval unresolved" in result.stdout
    # On a busy host every run may be discarded for interference: then no estimate is possible.
    assert (
        "more rounds" in result.stdout and "would resolve it at this noise" in result.stdout
    ) or ("too few usable runs to estimate" in result.stdout and "discarded" in result.stdout)


def test_bench_repeats_auto(run_cli, shared_workdir: Path):
    result = run_cli(
        shared_workdir, "bench", "--pg-version", "18", "-w", "select-only", "-s", "1", "-c", "1",
        "-T", "1", "--repeats", "auto", "--precision", "40", "--budget", "3m", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [r["repeat"] for r in runs] == list(range(1, len(runs) + 1))
    assert "rounds (adaptive)" in result.stderr
    if "every interval resolved" in result.stderr:
        assert len(runs) >= 5  # unbounded before 5 rounds


def test_adaptive_options_refused_clearly(run_cli, shared_workdir: Path, tmp_path: Path):
    both = plan(tmp_path, "repeats = 3\nprecision = 2.0")
    result = run_cli(shared_workdir, "compare", str(both))
    assert result.code == 2
    assert "give repeats (a fixed number of rounds) or precision/budget" in one_clear_sentence(
        result.stderr
    )
    bad_budget = plan(tmp_path, 'budget = "20"')
    result = run_cli(shared_workdir, "plan", "check", str(bad_budget))
    assert result.code == 2
    assert "budget '20' is not a duration: write it like 90s, 20m or 1h30m" in one_clear_sentence(
        result.stderr
    )
    result = run_cli(shared_workdir, "compare", str(plan(tmp_path, "")), "--budget", "soon")
    assert result.code == 2
    assert "--budget 'soon' is not a duration" in one_clear_sentence(result.stderr)
    result = run_cli(shared_workdir, "bench", "-w", "select-only", "--precision", "2")
    assert result.code == 2
    assert "add --repeats auto" in one_clear_sentence(result.stderr)
    result = run_cli(shared_workdir, "bench", "-w", "select-only", "--repeats", "many")
    assert result.code == 2
    assert "--repeats 'many' is not valid" in one_clear_sentence(result.stderr)


def _runs(results: Path) -> list[tuple[int, str, str, str | None]]:
    if not results.exists():
        return []
    conn = sqlite3.connect(results)
    try:
        return conn.execute(
            "SELECT id, started_at, finished_at, interference FROM runs ORDER BY id"
        ).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        conn.close()


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def test_aa_with_a_cpu_hog_flags_its_runs_and_finds_no_difference(
    run_cli, workdir: Path, tmp_path: Path
):
    """pgdyno runs as its own process; the hog is not its descendant, so it is foreign."""
    aa = plan(tmp_path, "repeats = 5", seconds=2)
    results = workdir / "results.sqlite"
    hog: subprocess.Popen[bytes] | None = None
    with pgdyno_process("compare", str(aa), "--workdir", str(workdir), "--json") as proc:
        try:
            assert wait_for(lambda: len(_runs(results)) >= 2, 300), "no run finished"
            hog = subprocess.Popen(
                [sys.executable, "-c", "while True: pass"], start_new_session=True
            )
            hog_start = time.time()
            assert wait_for(lambda: len(_runs(results)) >= 6, 300)
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        hog_end = time.time()
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    data = json.loads(stdout)
    during = [r for r in _runs(results) if _epoch(r[1]) >= hog_start and _epoch(r[2]) <= hog_end]
    assert during, "no run ran wholly while the hog did"
    for _, _, _, interference in during:
        assert interference is not None
        flagged = json.loads(interference)
        assert flagged["foreign_cpu_pct"] > 5.0
        assert any("python" in command for command, _ in flagged["top"]), flagged
    discarded = sum(r["discarded"] for r in data["analysis"]["results"])
    assert discarded >= len(during)
    assert b_change(data)["verdict"] == "no detectable difference"
    listed = {r["id"]: r["interference"] for r in data["runs"]}
    assert all(listed[run_id] is not None for run_id, *_ in during)
    table = run_cli(workdir, "runs", "list", "--limit", "20")
    assert table.code == 0 and "ok (interference)" in table.stdout
    shown = run_cli(workdir, "runs", "show", str(during[0][0]))
    assert shown.code == 0 and "interference" in shown.stdout
