"""The report's content and page, built from a results database recorded from real runs.

tests/data/report/results.sqlite holds two real comparisons (see record.py there):
1. "fixture <b>&amp; wal": sets small-wal (baseline) and large-wal, tpcb-like at 1 and 2
   clients, 2 repeats, checkpoints inside the runs;
2. "fixture-ladder": a three-step ladder on select-only.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pgdyno.errors import UsageError
from pgdyno.records.health import RunHealth
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import RunOutcome
from pgdyno.report import content, html
from pgdyno.report.export import CSV_COLUMNS, summary_csv
from pgdyno.report.load import ReportInput, Selection, load, parse_run_ids
from pgdyno.results.store import ResultsStore

FIXTURE = Path(__file__).parent.parent / "data" / "report" / "results.sqlite"


@pytest.fixture
def store(tmp_path: Path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, copy)  # opening migrates: never touch the recorded file
    with ResultsStore(copy) as opened:
        yield opened


def _build(data: ReportInput) -> dict[str, Any]:
    return content.build(data, "2026-11-21T00:00:00+00:00", "test")


def _traces(chart: dict[str, Any]) -> list[dict[str, Any]]:
    return list(chart["figure"]["data"])


def test_a_comparison_report_has_every_chart_the_data_allows(store: ResultsStore) -> None:
    report = _build(load(store, Selection(comparison_id=1)))
    assert [g["name"] for g in report["groups"]] == ["small-wal", "large-wal"]
    assert [g["baseline"] for g in report["groups"]] == [True, False]
    assert len({g["colour"] for g in report["groups"]}) == 2
    # One summary row per (cell, set): two client counts, two sets.
    assert [(r["clients"], r["group"]) for r in report["summary"]] == [
        (1, "small-wal"), (1, "large-wal"), (2, "small-wal"), (2, "large-wal"),
    ]  # fmt: skip
    assert all(r["runs"] == 2 for r in report["summary"])
    assert report["summary"][0]["verdict"] == "baseline"
    assert all(r["tps_change"] != "-" for r in report["summary"] if not r["baseline"])
    # TPS vs clients: a line per set over clients 1 and 2, with CI error bars.
    (tps,) = report["charts"]
    lines = _traces(tps)
    assert [t["name"] for t in lines] == ["small-wal", "large-wal"]
    assert all(t["x"] == [1, 2] and t["type"] == "scatter" for t in lines)
    assert all(len(t["error_y"]["array"]) == 2 for t in lines)
    # Each cell: timeline, disk, CPU/memory, statements and worst-case latency.
    assert [c["label"] for c in report["cells"]] == [
        "tpcb-like, scale 1, 1 client", "tpcb-like, scale 1, 2 clients",
    ]  # fmt: skip
    for cell in report["cells"]:
        kinds = [c["id"].rsplit("-", 1)[1] for c in cell["charts"]]
        assert kinds == ["timeline", "disk", "cpu", "statements", "worst"]
        timeline = _traces(cell["charts"][0])
        tps_lines = [t for t in timeline if t["yaxis"] == "y" and t["mode"] == "lines"]
        assert {t["legendgroup"] for t in tps_lines} == {"small-wal", "large-wal"}
        assert all(len(t["y"]) >= 5 for t in tps_lines)
        statements = _traces(cell["charts"][3])
        assert all(t["orientation"] == "h" for t in statements)
    assert any("UPDATE pgbench_accounts" in y for t in statements for y in t["y"])


def test_checkpoints_inside_runs_are_marked_on_the_timeline(store: ResultsStore) -> None:
    report = _build(load(store, Selection(comparison_id=1)))
    figures = [c["figure"] for cell in report["cells"] for c in cell["charts"]]
    shapes = [s for f in figures for s in f["layout"].get("shapes", [])]
    markers = [t for f in figures for t in f["data"] if t.get("mode") == "markers"]
    assert shapes and markers
    assert all(s["x1"] >= s["x0"] for s in shapes)
    assert any("buffers" in text for m in markers for text in m["text"])


def test_ladder_report_draws_a_waterfall_with_intervals(store: ResultsStore) -> None:
    report = _build(load(store, Selection(comparison_id=2)))
    (ladder,) = report["ladders"]
    assert [s["name"] for s in ladder["steps"]] == ["defaults", "no-jit", "bigger-buffers"]
    waterfall = next(c for c in report["charts"] if c["id"].startswith("ladder"))
    (bars,) = _traces(waterfall)
    assert bars["x"] == ["defaults", "no-jit", "bigger-buffers", "total"]
    assert bars["base"][0] == 0 and bars["y"][0] == pytest.approx(100)
    levels = [s["level_pct"] for s in ladder["steps"]]
    # Each step floats from the previous level to its own.
    for i in (1, 2):
        assert bars["base"][i] == pytest.approx(min(levels[i - 1], levels[i]))
        assert bars["y"][i] == pytest.approx(abs(levels[i] - levels[i - 1]))
    assert bars["y"][3] == pytest.approx(levels[-1])
    assert len(bars["error_y"]["array"]) == 4


def test_drill_down_shows_settings_that_differ_from_the_baseline(store: ResultsStore) -> None:
    report = _build(load(store, Selection(comparison_id=1)))
    large = [r for r in report["runs"] if r["group"] == "large-wal"]
    diff = {d["name"]: (d["baseline"], d["value"]) for d in large[0]["settings_diff"]}
    assert diff["max_wal_size"] == ("32MB", "1GB")  # as SHOW prints them
    assert "checkpoint_completion_target" in diff
    small = [r for r in report["runs"] if r["group"] == "small-wal"]
    assert any(r["id"] == r["settings_baseline_run"] for r in small)
    # Recorded on one VM: its virtio disk vda, ext4 on / (tests/data/report/record.py).
    vda = (
        "vda (ext4 on /, rw,relatime,discard,resv_strict,resuid=65534,resgid=65534; "
        "scheduler mq-deadline, read_ahead_kb 8192, rotational)"
    )
    for run in report["runs"]:
        assert run["environment"]["kernel"] == "6.18.44-fc-v669"
        assert run["environment"]["data device"] == vda
        assert run["pgbench_argv"].startswith("/") and "-c" in run["pgbench_argv"]
        assert [c["id"].rsplit("-", 1)[1] for c in run["charts"]] == ["timeline", "disk", "cpu"]


def test_plain_runs_group_by_session_and_report_missing_ids(store: ResultsStore) -> None:
    data = load(store, Selection(run_ids=(1, 2, 9, 500)))
    assert data.missing == [500]
    report = _build(data)
    assert [g["name"] for g in report["groups"]] == ["session 1", "session 2"]
    assert any("500" in note for note in report["notes"])


def test_last_picks_the_newest_comparison(store: ResultsStore) -> None:
    assert load(store, Selection(last=True)).comparison.id == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (Selection(comparison_id=99), "there is no comparison 99"),
        (Selection(session_id=99), "bench session 99 has no run"),
        (Selection(run_ids=(500, 501)), "none of the runs 500, 501"),
    ],
)
def test_selections_of_nothing_say_what_to_do(
    store: ResultsStore, selection: Selection, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        load(store, selection)


@pytest.mark.parametrize("words", [("x",), ("5-3",), ("0",), ("3-",)])
def test_bad_run_ids_are_refused(words: tuple[str, ...]) -> None:
    with pytest.raises(UsageError):
        parse_run_ids(words)


def test_page_is_self_contained_and_escapes_every_string(store: ResultsStore) -> None:
    data = load(store, Selection(comparison_id=1))
    report = _build(data)
    page = html.render(report, {s.name: s for s in data.comparison.sets})  # type: ignore[union-attr]
    # The plan's name is "fixture <b>&amp; wal": shown as text, never as markup.
    assert "<title>pgdyno report: compare fixture &lt;b&gt;&amp;amp; wal</title>" in page
    assert "<b>&amp; wal" not in page
    # No external resource in pgdyno's own markup (plotly.js holds URLs in strings it never
    # loads; the browser test checks the requests the page really makes).
    own = page.replace(html.plotly_js(), "")
    assert len(own) < len(page) - 1_000_000
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", own)
    embedded = re.search(
        r'<script id="report-data" type="application/json">(.*?)</script>', page, re.S
    )
    assert embedded is not None
    assert json.loads(embedded.group(1))["summary"] == json.loads(json.dumps(report["summary"]))
    assert "max_wal_size=32MB" in page  # the sets' settings are shown


def test_csv_has_one_row_per_cell_and_set(store: ResultsStore) -> None:
    report = _build(load(store, Selection(comparison_id=1)))
    rows = list(csv.DictReader(io.StringIO(summary_csv(report))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r["clients"], r["group"]) for r in rows] == [
        ("1", "small-wal"), ("1", "large-wal"), ("2", "small-wal"), ("2", "large-wal"),
    ]  # fmt: skip
    assert float(rows[1]["tps_median"]) > 0


def _printed(report: dict[str, Any]) -> list[str]:
    """The terminal summary `pgdyno report` prints, as lines."""
    from rich.console import Console

    from pgdyno.report.summary_table import summary_table

    console = Console(width=250, record=True)
    console.print(summary_table(report))
    return console.export_text().splitlines()


def test_the_printed_summary_of_a_bench_session_has_no_verdicts(store: ResultsStore) -> None:
    report = _build(load(store, Selection(run_ids=(1, 3, 5, 7))))  # one group
    header = next(line for line in _printed(report) if "TPS median" in line)
    for word in ("change", "verdict"):
        assert word not in header, word
    assert report["comparing"] is False


def test_the_printed_summary_shows_flagged_figures_not_judged(store: ResultsStore) -> None:
    from dataclasses import replace

    from pgdyno.records.interference import Interference

    data = load(store, Selection(comparison_id=1))
    busy = Interference(48.2, 0.0, (("yes", 47.5),))
    runs = [replace(r, interference=busy) if r.set_name == "large-wal" else r for r in data.runs]
    report = _build(replace(data, runs=runs))
    rows = [line for line in _printed(report) if "large-wal" in line]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.split("│")]
        assert cells[3] == "2 flagged" and cells[4] not in ("", "-")  # the median TPS
        assert "not judged" in row and "flagged for interference" in row


def test_a_comparison_report_says_which_design_ordered_its_rounds(store: ResultsStore) -> None:
    """The design and seed stored with the comparison's rounds reach the report's content and
    its page (issue 33: the result says which design ran); a comparison stored before its
    rounds were kept says nothing of them rather than guess."""
    before = _build(load(store, Selection(comparison_id=1)))["comparison"]
    assert (before["design"], before["seed"], before["orders"]) == (None, None, None)
    store.comparisons.record_rounds(
        1, RoundHistory("fixed", 2, (("small-wal", "large-wal"), ("large-wal", "small-wal")),
                        120.0, "repeats", design="balanced", seed=4242),
    )  # fmt: skip
    data = load(store, Selection(comparison_id=1))
    report = _build(data)
    head = report["comparison"]
    assert (head["design"], head["seed"]) == ("balanced", 4242)
    assert "seed 4242 (`--seed 4242` replays them)" in head["orders"]
    # the recorded runs ran without a warm-up: nothing dropped the seconds after each switch
    assert head["warmup_s"] == 0 and head["burn_in"].startswith("Burn-in: none")
    page = html.render(report, {s.name: s for s in data.comparison.sets})  # type: ignore[union-attr]
    assert '<p class="hint design" id="design">Orders: balanced design' in page
    assert '<p class="hint burn-in" id="burn-in">Burn-in: none' in page


def _run(i: int, name: str, round_no: int, tps: float) -> RunOutcome:
    return RunOutcome(i, name, "ok", "tpcb-like", 1, 1, round_no, tps, None, None, RunHealth(),
                      "18")  # fmt: skip


def test_the_report_shows_every_sets_switch_cost_and_warns_when_it_is_large() -> None:
    """Two sets in ABBA orders (so each runs right after itself as well as after the other):
    set b is 4% slower whenever it runs right after a. The report's carry-over section gives
    every set's estimated switch cost and the warning; runs whose design never put a set after
    itself give no switch cost (nothing to estimate it from)."""
    noise = [0.3, -0.2, 0.1, 0.0, -0.4, 0.2, 0.1, -0.1, 0.3, 0.0, -0.2, 0.1, 0.2, -0.3, 0.0, 0.1]
    sequence = [name for rnd in [("a", "b"), ("b", "a")] * 4 for name in rnd]
    runs = [
        _run(i + 1, name, i // 2 + 1, 1000.0 * (1 + noise[i] / 100)
             * (0.96 if name == "b" and i and sequence[i - 1] == "a" else 1.0))
        for i, name in enumerate(sequence)
    ]  # fmt: skip
    section = content.carryover_section(runs, ["a", "b"], "a", "balanced")
    assert section["switch_costs"] is not None
    assert re.search(r"b -4\.\d% \(se", str(section["switch_costs"]))
    warnings = section["warnings"]
    assert isinstance(warnings, list)
    assert any("runs of set b right after another set were 4." in w for w in warnings)
    json.dumps(section, allow_nan=False)  # strict JSON, as the page embeds it
    alternating = [_run(i + 1, "ab"[i % 2], i // 2 + 1, 1000.0 + i) for i in range(8)]
    assert content.carryover_section(alternating, ["a", "b"], "a", "balanced")[
        "switch_costs"] is None  # fmt: skip
