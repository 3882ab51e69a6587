"""The wait-event chart and tables of the report, from runs a real bench sampled (issue 24).

Two bench sessions of the same cell in the session's quiet work directory (its sandbox and
dataset are shared with test_report_tpcc.py), each sampling pg_stat_activity at the default
rate. A report of their runs groups them by session: the second is judged against the first,
so the page has the wait-type chart under each timeline and the table of the wait events whose
share moved. The page is drawn in a real headless Chromium.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from tests.browser import chromium
from tests.conftest import ARTIFACTS, make_env

from host_conditions import no_steal, quiet_pgdyno
from pgdyno.cli import main
from pgdyno.report.waits import WAIT_COLOURS

BENCH = ("bench", "--pg-version", "18", "-w", "tpcb-like", "-c", "4", "-T", "4", "--json")
# PostgreSQL's wait event types (pg_stat_activity.wait_event_type) and pgdyno's CPU*.
TYPES = {"CPU*", "Activity", "BufferPin", "Client", "Extension", "InjectionPoint", "IO", "IPC",
         "Lock", "LWLock", "Timeout"}  # fmt: skip

# A chart's traces as Plotly holds them once drawn, and the filled areas it drew.
TRACES = """
(id => {
  const el = document.getElementById(id);
  return {
    drawn: el.dataset.drawn || null,
    traces: el.data.map(t => ({name: t.name, stack: t.stackgroup || null,
                               colour: t.fillcolor || null, points: (t.y || []).length})),
    fills: el.querySelectorAll('.scatterlayer .trace path.js-fill').length,
    title: (el.querySelector('.gtitle') || {}).textContent || null,
  };
})
"""


def _cli(workdir: Path, cache_dir: Path, *args: str) -> tuple[int, str, str]:
    env = make_env(workdir, cache_dir)
    code = main(list(args), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


def _not_json(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


@pytest.fixture(scope="module")
def run_ids(quiet_workdir: Path) -> list[int]:
    """Two sampled runs of one cell, each in a bench session of its own, made in a PID
    namespace of their own (host_conditions.quiet_pgdyno) so that no run is left out of the
    comparison for the other processes of a shared machine; steal skips the module visibly."""
    runs = []
    for _ in range(2):
        bench = quiet_pgdyno(quiet_workdir, *BENCH)
        assert bench.code == 0, bench.stderr
        (run,) = json.loads(bench.stdout)
        assert run["status"] == "ok", run
        assert run["waits"] is not None and run["waits"]["db_time_s"] > 0, run["waits"]
        runs.append(run)
    no_steal([r["interference"] for r in runs])
    return [r["id"] for r in runs]


def _stacked(chart: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in chart["traces"] if t["stack"]]


def test_report_json_has_the_wait_changes_and_profiles(
    run_ids: list[int], quiet_workdir: Path, cache_dir: Path, tmp_path: Path
) -> None:
    args = ("report", *map(str, run_ids), "-o", str(tmp_path / "r.json"), "--json")
    code, _, err = _cli(quiet_workdir, cache_dir, *args)
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text(), parse_constant=_not_json)  # -o: JSON
    first, second = (g["name"] for g in report["groups"])
    changes = report["wait_changes"]
    assert changes, "no wait event moved between two runs"
    for row in changes:
        assert row["group"] == second and row["baseline_group"] == first
        assert row["change_points"] == pytest.approx(
            row["group_pct"] - row["baseline_pct"], abs=0.002
        )  # each rounded to 0.001
        assert row["event"].split(":")[0] in TYPES
    profiles = report["wait_profiles"]
    assert [p["group"] for p in profiles] == [first, second]
    for p in profiles:
        assert sum(t["share_pct"] for t in p["types"]) == pytest.approx(100.0, abs=0.01)
        assert all(t["colour"] == WAIT_COLOURS[t["type"]] for t in p["types"])
    assert all(r["waits"]["top"] for r in report["runs"])


def test_wait_chart_and_table_render_in_a_browser(
    run_ids: list[int], quiet_workdir: Path, cache_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "waits.html"
    code, _out, err = _cli(quiet_workdir, cache_dir, "report", *map(str, run_ids), "-o", str(path))
    assert code == 0, err
    with chromium() as browser:
        page = browser.open(path, wait_for="window.reportReady === true")
        ids = page.evaluate("[...document.querySelectorAll('#cell-0 .chart')].map(e => e.id)")
        assert ids[:2] == ["cell-0-timeline", "cell-0-waits"], ids  # right under the TPS chart
        chart = page.evaluate(f"{TRACES}('cell-0-waits')")
        assert chart["drawn"] == "yes" and chart["title"].startswith("Active sessions by wait")
        stacked = _stacked(chart)
        assert {t["name"] for t in stacked} <= TYPES and stacked, chart
        assert all(t["colour"] == WAIT_COLOURS[t["name"]] for t in stacked)
        assert all(t["points"] >= 3 for t in stacked)
        assert chart["fills"] == len(stacked)  # every area filled, none left as a bare line
        table = page.evaluate("document.querySelector('#waits').innerText")
        assert "Wait events whose share changed most" in table
        assert "Database time by wait type" in table
        # A run's drill-down: its own wait chart and top events, drawn when opened.
        page.evaluate(f"document.getElementById('run-{run_ids[0]}').open = true")
        page.wait_for(f"document.getElementById('run-{run_ids[0]}-waits').dataset.drawn === 'yes'")
        own = page.evaluate(f"{TRACES}('run-{run_ids[0]}-waits')")
        assert _stacked(own) and {t["name"] for t in _stacked(own)} <= TYPES
        text = page.evaluate(f"document.getElementById('run-{run_ids[0]}').innerText")
        assert "Top wait events" in text
        assert page.console_errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(ARTIFACTS / "report-waits.png")
