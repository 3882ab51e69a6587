"""Switching inside one run on a busy host (issue 33, section 2, "Interference hits both
sides"): an A/A comparison switched inside one pgbench run while a CPU hog (tests/host_conditions.py
`cpu_hog`: a whole CPU, half of this 2-CPU machine) runs beside it keeps its disturbed periods
(flagged, stored with their interference, none discarded), judges every round, says what the
adjustment for interference did, and gives no "better" or "worse".

pgdyno runs as a process of its own (`pgdyno_process`), so the hog (a child of the test) is
foreign to it, as another user's job would be, and so is whatever else runs on the host."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import pgdyno_process
from e2e.test_switching import AA, AA_MATRIX
from host_conditions import cpu_hog
from plans import bare_plan


def test_a_switched_aa_beside_a_cpu_hog_keeps_and_adjusts_its_periods(
    shared_workdir: Path, tmp_path: Path
):
    path = tmp_path / "aa-busy.toml"
    # test_switching's reload-only A/A, with a budget for the rounds the hog leaves
    path.write_text(bare_plan("aa-busy", AA, **{**AA_MATRIX, "budget": "60s"}))
    args = ("compare", str(path), "--json", "--seed", "7", "--workdir", str(shared_workdir))
    with cpu_hog(), pgdyno_process(*args) as proc:
        stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    data = json.loads(stdout)
    rounds = data["rounds"]
    assert rounds["design"] == "switching", rounds
    flagged = [r["interference"] for r in data["runs"] if r["interference"] is not None]
    assert len(flagged) >= len(data["runs"]) // 2, data["runs"]  # the hog ran throughout
    assert all(float(f["foreign_cpu_pct"]) > 5.0 for f in flagged)
    result = next(r for r in data["analysis"]["results"] if r["set_name"] == "b")
    assert result["discarded"] == 0, result  # kept, not left out
    change = result["tps_change"]
    assert change is not None and change["method"] == "sequential", change
    assert change["pairs"] == rounds["rounds"], change  # every round judged
    assert change["verdict"] not in ("better", "worse"), change
    assert {"adjusted_rounds", "adjusted_slope", "narrowed_pct"} <= change.keys()
    assert any("disturbed" in w and "kept" in w for w in result["warnings"]), result["warnings"]
    if change["adjusted_rounds"]:
        assert any("adjusted for interference" in w for w in result["warnings"])
