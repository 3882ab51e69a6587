"""`pgdyno capacity` on the real sandbox and real pgbench, and its report in a real headless
Chromium (issue 34).

One short sweep in the session's quiet work directory (its sandbox is shared with the other
quiet modules; scale 1): steps of 3 s (of 2 s, a step on a loaded host once ended
before the sampler's first second), one run at each end, a p99 target the server meets at
low load and misses when the schedule outruns it. Whether the sweep brackets the capacity in
its 20 s depends on the host, so the tests check what must hold whatever it found: the steps
are stored runs with their timeline, the JSON is strict and names the knee and the capacity,
the budget is kept, and the report draws the curves with the target and the knee. The
interval's statistics are proved by tests/unit/test_capacity_sim.py.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from tests.browser import chromium
from tests.conftest import ARTIFACTS

from host_conditions import quiet_pgdyno
from pgdyno.records.capacity import (
    BRACKETED,
    BUDGET,
    CLIENT_LIMIT,
    NEVER_OVER,
    NEVER_UNDER,
    RUNNING,
    STEP_LIMIT,
)
from pgdyno.results.store import ResultsStore
from plans import tiny_plan

SWEEP = ("capacity", "--pg-version", "18", "-s", "1", "-c", "4", "-T", "3", "--repeats", "1",
         "--p99", "20ms", "--budget", "20s", "--json")  # fmt: skip
STOPS = {BRACKETED, BUDGET, CLIENT_LIMIT, NEVER_OVER, NEVER_UNDER, STEP_LIMIT}


def strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def sweep(quiet_workdir: Path) -> dict:
    result = quiet_pgdyno(quiet_workdir, *SWEEP)
    assert result.code == 0, result.stderr
    found = strict(result.stdout)
    assert isinstance(found, dict)
    return found


def test_the_sweep_names_its_knee_and_capacity_and_stores_each_step(
    sweep: dict, quiet_workdir: Path
):
    for key in ("knee", "capacity_tps", "over_tps", "confidence", "target_p99_ms", "steps"):
        assert key in sweep
    assert sweep["target_p99_ms"] == 20.0 and sweep["confidence"] == 0.0  # 1 - 2 x 0.5^1
    assert sweep["stopped"] in STOPS
    steps = sweep["steps"]
    assert len(steps) >= 2 and [s["run_id"] for s in steps] == sweep["run_ids"]
    asked = [s["asked_tps"] for s in steps if s["phase"] != "closed"]
    assert asked and all(a > 0 for a in asked)
    for s in steps:
        assert s["verdict"] in {"closed", "under", "over", "unsustained", "client-bound",
                                "interfered", "failed"}  # fmt: skip
    if sweep["capacity_tps"] is not None and sweep["over_tps"] is not None:
        assert sweep["capacity_tps"] < sweep["over_tps"]
    with sqlite3.connect(quiet_workdir / "results.sqlite") as db:
        rows = db.execute(
            "SELECT id, rate, (SELECT count(*) FROM run_samples WHERE run_id = runs.id),"
            " started_at FROM runs WHERE session_id = ? ORDER BY id", (sweep["session_id"],),
        ).fetchall()  # fmt: skip
        kept = db.execute(
            "SELECT capacity FROM sessions WHERE id = ?", (sweep["session_id"],)
        ).fetchone()[0]
    assert [r[0] for r in rows] == sweep["run_ids"]
    assert [r[1] for r in rows if r[1] is not None] == asked  # each step ran at its rate
    assert all(samples > 0 for _, _, samples, _ in rows), (rows, steps)  # each has its timeline
    assert json.loads(kept)["steps"] == steps
    # Every step began inside the budget (the last may end past it by one step).
    began = [datetime.fromisoformat(r[3]).timestamp() for r in rows]
    assert began[-1] - began[0] <= 20.0


def test_the_report_draws_the_curves_with_target_and_knee(
    sweep: dict, run_cli, quiet_workdir: Path, tmp_path: Path
):
    session = ("report", "--session", str(sweep["session_id"]))
    made = run_cli(quiet_workdir, *session, "-o", str(tmp_path / "r.json"), "--json")
    assert made.code == 0, made.stderr
    report = strict((tmp_path / "r.json").read_text())
    assert isinstance(report, dict) and report["title"].startswith("capacity session")
    out = tmp_path / "capacity.html"
    made = run_cli(quiet_workdir, *session, "-o", str(out))
    assert made.code == 0, made.stderr
    (row,) = report["capacity"]
    assert row["capacity_tps"] == sweep["capacity_tps"] and row["steps"] == len(sweep["steps"])
    with chromium() as browser:
        page = browser.open(out, wait_for="window.reportReady === true")
        names = page.evaluate(
            "document.getElementById('capacity-0') ? "
            "document.getElementById('capacity-0').data.map(t => t.name) : null"
        )
        table = page.evaluate("document.querySelector('table.capacity').innerText")
        page.screenshot(ARTIFACTS / "capacity-report.png")
        assert page.console_errors == []
    assert "p99 target 20 ms" in names
    assert any(n.endswith(" p99") for n in names) and any(n.endswith(" p50") for n in names)
    if sweep["knee"] is not None:
        assert any(n.endswith(" knee") for n in names)
    assert "20.000" in table and "interval" in table


def test_a_plans_sets_are_compared_on_capacity_beside_tps(
    quiet_workdir: Path, run_cli, tmp_path: Path
):
    """`[matrix] capacity_p99` (issue 34 §1): `compare` runs its TPS round, then sweeps both
    sets (jit off and on: a reload-only setting select-only does not feel) with their steps
    interleaved, each within its half of the budget; `compare --json` (strict) gives each
    set's sweep (a session of its own, its runs outside the comparison) and the candidate
    judged against the baseline on capacity; the comparison's report draws one curve a set.
    Structure only: what the sweeps find depends on the host (tests/unit/test_capacity_sim.py
    proves the verdicts)."""
    plan = tmp_path / "capacity.toml"
    plan.write_text(tiny_plan("capacity", (("a", {"jit": "off"}), ("b", {"jit": "on"})),
                              clients=[2], design="runs", capacity_p99="20ms",
                              capacity_step=1, capacity_repeats=1,
                              capacity_budget="16s"))  # fmt: skip
    done = quiet_pgdyno(quiet_workdir, "compare", str(plan), "--json")
    assert done.code == 0, done.stderr
    found = strict(done.stdout)
    assert isinstance(found, dict)
    capacity = found["capacity"]
    assert capacity["target_p99_ms"] == 20.0
    sweeps = capacity["sweeps"]
    assert [s["set"] for s in sweeps] == ["a", "b"]
    comparison_runs = {r["id"] for r in found["runs"]}
    for s in sweeps:
        assert s["stopped"] in STOPS | {"failed"} and s["steps"]
        assert [step["run_id"] for step in s["steps"]] == s["run_ids"]
        assert not comparison_runs & set(s["run_ids"])  # the TPS verdicts see no open-loop run
        assert s["closed_tps"] is not None  # from the comparison's own runs: no closed step
        assert all(step["phase"] != "closed" for step in s["steps"])
    (change,) = capacity["changes"]
    assert (change["baseline"], change["candidate"]) == ("a", "b")
    assert change["verdict"] == "unknown"  # one run at each end states no confidence
    assert change["line"].startswith("b against a at p99 <= 20 ms: unknown")
    with sqlite3.connect(quiet_workdir / "results.sqlite") as db:
        rows = db.execute(
            "SELECT session_id, set_name, comparison_id, started_at FROM runs WHERE id IN"
            f" ({','.join(str(i) for s in sweeps for i in s['run_ids'])}) ORDER BY id"
        ).fetchall()
    by_session = {s["session_id"]: s["set"] for s in sweeps}
    assert all(by_session[sid] == name and cid is None for sid, name, cid, _ in rows)
    order = [name for _, name, _, _ in rows]
    assert order[:2] in (["a", "b"], ["b", "a"])  # interleaved: each set's first step first
    began = [datetime.fromisoformat(r[3]).timestamp() for r in rows]
    assert began[-1] - began[0] <= 16.0  # every step began inside the budget
    report = tmp_path / "r.json"
    made = run_cli(quiet_workdir, "report", "--comparison", str(found["comparison"]["id"]),
                   "-o", str(report), "--json")  # fmt: skip
    assert made.code == 0, made.stderr
    shown = strict(report.read_text())
    assert isinstance(shown, dict)
    assert [row["group"] for row in shown["capacity"]] == ["a", "b"]
    (curves,) = [c for c in shown["charts"] if c["id"] == "capacity-0"]
    names = [trace.get("name", "") for trace in curves["figure"]["data"]]
    assert any(n.startswith("a ") for n in names) and any(n.startswith("b ") for n in names)

    # --resume after set a's sweep was cut off after its first step (as a SIGKILL leaves it:
    # kept as running): b's ended sweep is kept as it is, a's goes on from that step.
    a, b = sweeps
    with ResultsStore(quiet_workdir / "results.sqlite") as store:
        kept = store.capacity(a["session_id"])
        assert kept is not None and len(kept.steps) >= 2
        store.record_capacity(a["session_id"], replace(kept, steps=kept.steps[:1],
                                                       stopped=RUNNING))  # fmt: skip
    again = quiet_pgdyno(quiet_workdir, "compare", str(plan), "--resume", "--json")
    assert again.code == 0, again.stderr
    assert "set b: its sweep ended before" in again.stderr
    assert "set a: its sweep goes on after step 1 (session" in again.stderr
    resumed = strict(again.stdout)
    assert isinstance(resumed, dict)
    assert {r["id"] for r in resumed["runs"]} == comparison_runs  # no TPS run made again
    a2, b2 = resumed["capacity"]["sweeps"]
    assert (b2["session_id"], b2["run_ids"]) == (b["session_id"], b["run_ids"])
    assert a2["session_id"] != a["session_id"] and a2["run_ids"][0] == a["run_ids"][0]
    assert len(a2["run_ids"]) >= 2 and not set(a2["run_ids"][1:]) & set(a["run_ids"])
    assert a2["stopped"] in STOPS | {"failed"}
