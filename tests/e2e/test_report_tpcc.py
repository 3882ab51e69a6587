"""The report of TPC-C-like runs, built from runs a real bench and a real comparison stored.

Made once for the module in the session's shared work directory: one warehouse generated, a
bench of two 5-second runs at 2 clients, and a comparison of two sets (one round each). The
content is checked as `report.content.build` makes it and as `report --json/--csv` prints it;
one test draws the page in a real headless Chromium.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from tests.browser import chromium
from tests.conftest import ARTIFACTS, make_env

from host_conditions import no_steal, quiet_pgdyno
from pgdyno.cli import main
from pgdyno.report import content, html
from pgdyno.report.load import Selection, load
from pgdyno.results.store import ResultsStore

PLAN = """
name = "tpcc-report"
[matrix]
workloads = ["tpcc"]
scales = [1]
clients = [2]
duration = 5
repeats = 1
warmup = 0

[[set]]
name = "defaults"

[[set]]
name = "async-commit"
[set.pg]
synchronous_commit = "off"
"""
TYPES = ["new-order", "payment", "order-status", "delivery", "stock-level"]


@dataclass(frozen=True)
class Stored:
    workdir: Path
    session_id: int  # the bench's
    comparison_id: int


def _cli(workdir: Path, cache_dir: Path, *args: str) -> tuple[int, str, str]:
    env = make_env(workdir, cache_dir)
    code = main(list(args), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


@pytest.fixture(scope="module")
def stored(quiet_workdir: Path, tmp_path_factory) -> Stored:
    """Runs made in a PID namespace of their own (host_conditions.quiet_pgdyno), so that no run
    is discarded for the other processes of a shared machine; steal skips the module visibly."""
    bench_args = ("-w", "tpcc", "-s", "1", "-c", "2", "-T", "5", "--warmup", "0",
                  "--pg-version", "18")  # fmt: skip
    bench = quiet_pgdyno(quiet_workdir, "bench", *bench_args, "--repeats", "2", "--json")
    assert bench.code == 0, bench.stderr
    runs = json.loads(bench.stdout)
    assert [r["status"] for r in runs] == ["ok", "ok"], runs
    plan = tmp_path_factory.mktemp("plan") / "tpcc.toml"
    plan.write_text(textwrap.dedent(PLAN))
    compared = quiet_pgdyno(quiet_workdir, "compare", str(plan), "--json")
    assert compared.code == 0, compared.stderr
    data = json.loads(compared.stdout)
    no_steal([r["interference"] for r in runs + data["runs"]])
    return Stored(quiet_workdir, runs[0]["session_id"], data["comparison"]["id"])


def _not_json(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def _build(stored: Stored, selection: Selection) -> dict[str, Any]:
    with ResultsStore(stored.workdir / "results.sqlite") as store:
        return content.build(load(store, selection), "2026-11-26T00:00:00+00:00", "test")


def _chart(charts: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [c for c in charts if c["id"].endswith("-" + kind)]
    return found


def test_comparison_report_says_nopm_and_draws_the_tpcc_charts(stored: Stored) -> None:
    report = _build(stored, Selection(comparison_id=stored.comparison_id))
    assert [g["name"] for g in report["groups"]] == ["defaults", "async-commit"]
    # The summary is on NOPM: its figure, its heading, and the runs' NOPM in it.
    assert report["figure_label"] == "NOPM"
    assert [r["figure"] for r in report["summary"]] == ["nopm", "nopm"]
    nopm = {r["group"]: r["tpcc"]["nopm"] for r in report["runs"]}
    for row in report["summary"]:
        assert row["tps_median"] == pytest.approx(nopm[row["group"]])
    # NOPM at 2 clients: one bar per set, the axis and hover say NOPM.
    (clients,) = report["charts"]
    assert clients["figure"]["layout"]["yaxis"]["title"]["text"] == "NOPM"
    assert clients["figure"]["layout"]["title"]["text"] == "NOPM at 2 clients: tpcc, 1 warehouse"
    assert "NOPM" in clients["note"] and "TPS" not in clients["note"].split("(")[0]
    assert all("NOPM" in t["hovertemplate"] for t in clients["figure"]["data"])
    (cell,) = report["cells"]
    assert cell["label"] == "tpcc, 1 warehouse, 2 clients"  # its scale is its warehouses
    assert cell["figure_label"] == "NOPM"
    kinds = [c["id"].rsplit("-", 1)[1] for c in cell["charts"]]
    assert kinds[0] == "nopm" and "types" in kinds and "timeline" in kinds
    # NOPM over time: a line per set, from the representative runs' per-second NOPM.
    nopm_chart = _chart(cell["charts"], "nopm")
    lines = [t for t in nopm_chart["figure"]["data"] if t["mode"] == "lines"]
    assert {t["legendgroup"] for t in lines} == {"defaults", "async-commit"}
    assert all(len(t["y"]) >= 3 and max(t["y"]) > 0 for t in lines)
    assert all(0 <= x <= 10 for t in lines for x in t["x"])  # seconds since the start
    assert nopm_chart["figure"]["layout"]["yaxis"]["title"]["text"] == "NOPM"
    assert "median NOPM" in _chart(cell["charts"], "timeline")["note"]
    # Latency per type: the five types on x, a bar per set, p90 with its range, hover p50/p99.
    types = _chart(cell["charts"], "types")
    assert "p90" in types["note"] and "HammerDB" in types["note"]
    bars = types["figure"]["data"]
    assert [b["name"] for b in bars] == ["defaults", "async-commit"]
    for bar in bars:
        assert bar["x"] == TYPES
        assert all(y > 0 for y in bar["y"])
        assert all("p50" in t and "p99" in t and "max" in t for t in bar["text"])
    run = next(r for r in report["runs"] if r["id"] == cell["representatives"]["defaults"])
    p90 = [t["p90_ms"] for t in run["tpcc"]["transaction_rows"]]
    assert bars[0]["y"] == pytest.approx(p90)  # one repeat: the median is that run's


def test_repeats_give_error_bars_from_best_to_worst(stored: Stored) -> None:
    report = _build(stored, Selection(session_id=stored.session_id))
    runs = report["runs"]
    assert len(runs) == 2 and all(r["tpcc"] for r in runs)
    (cell,) = report["cells"]
    (bar,) = _chart(cell["charts"], "types")["figure"]["data"]
    errors = bar["error_y"]
    for i, name in enumerate(["new_order", "payment", "order_status", "delivery", "stock_level"]):
        values = sorted(r["tpcc"]["transactions"][name]["p90_ms"] for r in runs)
        assert bar["y"][i] == pytest.approx(sum(values) / 2)  # the median of two
        assert bar["y"][i] + errors["array"][i] == pytest.approx(values[1])
        assert bar["y"][i] - errors["arrayminus"][i] == pytest.approx(values[0])
    # The representative is the repeat with the lower NOPM of the two.
    lower = min(runs, key=lambda r: r["tpcc"]["nopm"])
    assert list(cell["representatives"].values()) == [lower["id"]]


def test_a_tpcc_ladder_is_drawn_as_percent_of_the_first_steps_nopm(stored: Stored) -> None:
    """The stored comparison read as a two-step ladder (its runs are what a ladder stores)."""
    with ResultsStore(stored.workdir / "results.sqlite") as store:
        data = load(store, Selection(comparison_id=stored.comparison_id))
    assert data.comparison is not None
    data = replace(data, comparison=replace(data.comparison, mode="ladder"))
    report = content.build(data, "2026-11-26T00:00:00+00:00", "test")
    (ladder,) = report["ladders"]
    assert ladder["figure"] == "nopm"
    nopm = {r["group"]: r["tpcc"]["nopm"] for r in report["runs"]}
    assert [s["tps_median"] for s in ladder["steps"]] == pytest.approx(
        [nopm["defaults"], nopm["async-commit"]]
    )
    waterfall = next(c for c in report["charts"] if c["id"].startswith("ladder"))
    assert waterfall["figure"]["layout"]["yaxis"]["title"]["text"] == "% of the first step's NOPM"
    assert "median NOPM" in waterfall["note"]
    page = html.render(report)
    assert "<th>NOPM median</th>" in page and "TPS median" not in page


def test_drill_down_has_the_runs_tpcc_figures(stored: Stored) -> None:
    report = _build(stored, Selection(session_id=stored.session_id))
    for run in report["runs"]:
        t = run["tpcc"]
        assert t["warehouses"] == 1 and t["nopm"] > 0 and t["tpm"] > 0
        assert t["consistency"] == "passed" and isinstance(t["mix_ok"], bool)
        assert [x["label"] for x in t["transaction_rows"]] == TYPES
        assert sum(x["count"] for x in t["transaction_rows"]) > 0
        assert run["charts"][0]["id"] == f"run-{run['id']}-nopm"


def test_json_and_csv_carry_the_figure(stored: Stored, cache_dir: Path, tmp_path: Path) -> None:
    args = ("report", "--comparison", str(stored.comparison_id))  # JSON and CSV to stdout
    code, out, err = _cli(stored.workdir, cache_dir, *args, "--json")
    assert code == 0, err
    data = json.loads(out, parse_constant=_not_json)  # strict JSON: no NaN or Infinity
    assert [r["figure"] for r in data["summary"]] == ["nopm", "nopm"]
    assert all(r["tpcc"]["transactions"]["new_order"]["count"] > 0 for r in data["runs"])
    code, out, err = _cli(stored.workdir, cache_dir, *args, "--csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["figure"] for r in rows] == ["nopm", "nopm"]
    assert [float(r["tps_median"]) for r in rows] == pytest.approx(
        [r["tps_median"] for r in data["summary"]]
    )
    code, out, err = _cli(stored.workdir, cache_dir, *args, "-o", str(tmp_path / "r.html"))
    assert code == 0 and "NOPM median" in out, err


DRAWN = """
(() => {
  const out = {};
  for (const el of document.querySelectorAll('.chart')) {
    out[el.id] = {
      drawn: el.dataset.drawn || null,
      lines: el.querySelectorAll('.scatterlayer .trace path.js-line').length,
      bars: el.querySelectorAll('.barlayer .point').length,
      ytitle: (el.querySelector('.ytitle') || {}).textContent || null,
    };
  }
  return out;
})()
"""


def test_tpcc_charts_render_in_a_browser(stored: Stored, cache_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "tpcc.html"
    args = ("report", "--comparison", str(stored.comparison_id), "-o", str(path))
    code, _out, err = _cli(stored.workdir, cache_dir, *args)
    assert code == 0, err
    with chromium() as browser:
        page = browser.open(path, wait_for="window.reportReady === true")
        charts = page.evaluate(DRAWN)
        assert charts["cell-0-nopm"]["drawn"] == "yes"
        assert charts["cell-0-nopm"]["lines"] == 2 and charts["cell-0-nopm"]["ytitle"] == "NOPM"
        assert charts["cell-0-types"]["drawn"] == "yes"
        assert charts["cell-0-types"]["bars"] == 2 * len(TYPES)
        assert charts["tps-clients-0"]["ytitle"] == "NOPM"
        header = page.evaluate("document.querySelector('#summary thead').innerText")
        assert "NOPM median" in header and "TPS" not in header
        run_id = page.evaluate("document.querySelector('details.run').dataset.run")
        page.evaluate(f"document.getElementById('run-{run_id}').open = true")
        page.wait_for(f"document.getElementById('run-{run_id}-nopm').dataset.drawn === 'yes'")
        text = page.evaluate(f"document.getElementById('run-{run_id}').innerText")
        assert "NOPM" in text and "TPM" in text and "passed" in text and "stock-level" in text
        assert page.console_errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(ARTIFACTS / "report-tpcc.png")
