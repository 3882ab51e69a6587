"""`pgdyno report` end to end: the CLI writes the page, a real headless Chromium draws it.

The results database is the recorded fixture of real runs (tests/data/report, see record.py
there). Screenshots land in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.browser import Page, chromium
from tests.conftest import ARTIFACTS

from pgdyno.records.rounds import RoundHistory
from pgdyno.results.store import ResultsStore

FIXTURE = Path(__file__).parent.parent / "data" / "report" / "results.sqlite"

# Per chart: how many drawn marks of each kind the page must hold (at least).
DRAWN = """
(() => {
  const out = {};
  for (const el of document.querySelectorAll('.chart')) {
    out[el.id] = {
      drawn: el.dataset.drawn || null,
      points: Number(el.dataset.points || 0),
      lines: el.querySelectorAll('.scatterlayer .trace path.js-line').length,
      bars: el.querySelectorAll('.barlayer .point').length,
      title: (el.querySelector('.gtitle') || {}).textContent || null,
      ytitle: (el.querySelector('.ytitle') || {}).textContent || null,
    };
  }
  return out;
})()
"""


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A copy of the recorded store, brought up to this pgdyno's schema as any writing command
    would (reading commands read a store as it is, never migrating it)."""
    copy = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, copy)
    ResultsStore(copy).close()
    return copy


def _report(run_cli, workdir: Path, results: Path, *args: str) -> Path:
    out = workdir / "report.html"
    result = run_cli(workdir, "report", *args, "--results", str(results), "-o", str(out))
    assert result.code == 0, result.stderr
    assert f"report: {out}" in result.stdout + result.stderr
    return out


@pytest.fixture
def browser():
    with chromium() as opened:
        yield opened


def _drawn(page: Page) -> dict[str, Any]:
    charts = page.evaluate(DRAWN)
    assert isinstance(charts, dict)
    return charts


def test_comparison_report_draws_every_chart_offline(
    run_cli, tmp_path: Path, results: Path, browser
) -> None:
    path = _report(run_cli, tmp_path, results, "--comparison", "1")
    page = browser.open(path, wait_for="window.reportReady === true")
    charts = _drawn(page)
    expected = ["tps-clients-0"] + [
        f"cell-{i}-{kind}"
        for i in (0, 1)
        for kind in ("timeline", "disk", "cpu", "statements", "worst")
    ]
    for chart_id in expected:
        chart = charts[chart_id]
        assert chart["drawn"] == "yes", chart_id
        assert chart["points"] > 0, chart_id
        assert chart["lines"] + chart["bars"] > 0, (chart_id, chart)
        assert chart["title"], chart_id
    assert charts["cell-0-timeline"]["ytitle"] == "TPS"
    assert charts["tps-clients-0"]["lines"] == 2  # one line per set
    # A run's charts wait until its drill-down is opened; then they are drawn too.
    assert charts["run-3-timeline"]["drawn"] is None
    page.evaluate("document.getElementById('run-3').open = true")
    page.wait_for("document.getElementById('run-3-cpu').dataset.drawn === 'yes'")
    after = _drawn(page)
    assert all(after[f"run-3-{k}"]["lines"] > 0 for k in ("timeline", "disk", "cpu"))
    # Checkpoint spans are drawn on the timeline.
    assert (
        page.evaluate("document.querySelectorAll('#cell-1-timeline .shapelayer path').length") > 0
    )
    # Strings from the plan are text, not markup.
    assert page.evaluate("document.querySelector('h1').textContent") == (
        "compare fixture <b>&amp; wal"
    )
    assert page.evaluate("document.querySelectorAll('h1 b').length") == 0
    assert page.console_errors == []
    assert all(url.startswith("file://") for url in page.requests), page.requests
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(ARTIFACTS / "report-comparison.png")
    assert (ARTIFACTS / "report-comparison.png").stat().st_size > 10_000


def test_ladder_report_draws_the_waterfall(run_cli, tmp_path: Path, results: Path, browser) -> None:
    path = _report(run_cli, tmp_path, results, "--comparison", "2")
    page = browser.open(path, wait_for="window.reportReady === true")
    charts = _drawn(page)
    waterfall = charts["ladder-0"]
    assert waterfall["drawn"] == "yes" and waterfall["bars"] == 4  # three steps and the total
    assert "of the first step" in (waterfall["ytitle"] or "")
    assert page.evaluate("document.querySelectorAll('#summary table').length") == 2
    assert page.console_errors == []
    page.screenshot(ARTIFACTS / "report-ladder.png")


def test_the_page_and_the_listing_say_which_design_ordered_the_rounds(
    run_cli, tmp_path: Path, results: Path, browser
) -> None:
    """A comparison's stored design and seed are shown on the page a person reads (issue 33:
    the result says which design ran), the same in `--json`, and above `runs list
    --comparison`'s table; the page and `runs show` say the burn-in (the unmeasured warm-up
    after each set switch) the stored runs had."""
    rounds = RoundHistory(
        "fixed", 2, (("defaults", "no-jit", "bigger-buffers"), ("no-jit", "defaults",
                                                               "bigger-buffers")),
        90.0, "repeats", design="balanced", seed=31337,
    )  # fmt: skip
    with ResultsStore(results) as store:
        store.comparisons.record_rounds(2, rounds)
    path = _report(run_cli, tmp_path, results, "--comparison", "2")
    page = browser.open(path, wait_for="window.reportReady === true")
    shown = page.evaluate("document.getElementById('design').innerText")
    assert shown.startswith("Orders: balanced design") and "seed 31337" in shown
    assert page.evaluate("document.getElementById('design').offsetParent !== null") is True
    burn_in = page.evaluate("document.getElementById('burn-in').innerText")
    assert burn_in.startswith("Burn-in: none ([matrix] warmup = 0)")  # the recorded runs had none
    assert page.console_errors == []
    printed = run_cli(tmp_path, "report", "--comparison", "2", "--results", str(results), "--json")
    head = json.loads(printed.stdout)["comparison"]
    assert (head["design"], head["seed"]) == ("balanced", 31337)
    listing = run_cli(tmp_path, "runs", "list", "--comparison", "2", "--results", str(results))
    assert listing.code == 0, listing.stderr
    first = " ".join(listing.stdout.split("runs (newest first)")[0].split())
    assert first.startswith("comparison 2: plan fixture-ladder")
    assert "Orders: balanced design" in first and "seed 31337" in first
    shown = run_cli(tmp_path, "runs", "show", "9", "--results", str(results))
    assert "after 0 s unmeasured warm-up" in " ".join(shown.stdout.split())  # its burn-in


def test_hash_link_opens_a_runs_drill_down(run_cli, tmp_path: Path, results: Path, browser) -> None:
    path = _report(run_cli, tmp_path, results, "--comparison", "1")
    page = browser.open(f"{path.as_uri()}#run-4", wait_for="window.reportReady === true")
    page.wait_for("document.getElementById('run-4-timeline').dataset.drawn === 'yes'")
    assert page.evaluate("document.getElementById('run-4').open") is True
    text = page.evaluate("document.getElementById('run-4').innerText")
    assert "max_wal_size" in text and "1GB" in text  # differs from the baseline, as SHOW prints it
    assert "pgbench" in text and "kernel" in text
    assert page.console_errors == []


def test_json_and_csv_carry_the_same_summary(run_cli, tmp_path: Path, results: Path) -> None:
    as_json = run_cli(tmp_path, "report", "--comparison", "1", "--results", str(results), "--json")
    assert as_json.code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert "report: " in as_json.stderr and ".html" in as_json.stderr
    as_csv = run_cli(tmp_path, "report", "--comparison", "1", "--results", str(results), "--csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [r["group"] for r in rows] == [r["group"] for r in data["summary"]]
    assert [float(r["tps_median"]) for r in rows] == pytest.approx(
        [r["tps_median"] for r in data["summary"]]
    )
    out = tmp_path / "r.html"
    table = run_cli(tmp_path, "report", "--comparison", "1", "--results", str(results),
                    "-o", str(out))  # fmt: skip
    assert "large-wal" in table.stdout and "baseline" in table.stdout


def test_output_with_json_or_csv_writes_that_content_to_the_file(
    run_cli, tmp_path: Path, results: Path
) -> None:
    """`report --json -o FILE` writes the JSON to FILE (it wrote the HTML there before), and
    --csv the CSV; the HTML page goes to its default place, as without -o."""
    printed = run_cli(tmp_path, "report", "--comparison", "1", "--results", str(results), "--json")
    for option, name in (("--json", "r.json"), ("--csv", "r.csv")):
        out = tmp_path / name
        done = run_cli(tmp_path, "report", "--comparison", "1", "--results", str(results),
                       option, "-o", str(out))  # fmt: skip
        assert done.code == 0, done.stderr
        assert done.stdout == ""
        text = out.read_text()
        assert not text.lstrip().startswith("<")
        if option == "--json":
            assert json.loads(text)["summary"] == json.loads(printed.stdout)["summary"]
        else:
            assert text.startswith("group,") or "tps_median" in text.splitlines()[0]
        html = [p for p in (tmp_path / "reports").glob("*.html")]
        assert html and "<html" in html[0].read_text()[:500].lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "say what to report on"),
        (("--comparison", "7"), "there is no comparison 7"),
        (("--last", "--comparison", "1"), "say what to report on"),
        (("x1",), "is not a run id"),
        (("--json", "--csv", "--last"), "choose one of --json and --csv"),
    ],
)
def test_bad_requests_say_what_to_do(
    run_cli, tmp_path: Path, results: Path, args: tuple[str, ...], message: str
) -> None:
    result = run_cli(tmp_path, "report", *args, "--results", str(results))
    assert result.code != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("reports/*.html"))


def test_missing_results_database(run_cli, tmp_path: Path) -> None:
    result = run_cli(tmp_path, "report", "--last", "--results", str(tmp_path / "none.sqlite"))
    assert result.code != 0 and "no results database" in result.stderr
