"""What a person sees on the report page (issue 31, item 6), drawn in a real headless Chromium.

The pages are built from the recorded comparisons of tests/data/report/results.sqlite (real
runs, see record.py there), changed where a test needs a condition those runs did not meet: a
busy host (runs flagged for interference, as `Interference` records it), a set whose data lay on
another device (its samples named after that device, as the sampler names them), five sets in
one cell. Screenshots land in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.browser import Browser, Page, chromium
from tests.conftest import ARTIFACTS

from pgdyno.collect.timeline import PROGRESS_METRIC
from pgdyno.records.interference import Interference
from pgdyno.records.stored import StoredRun
from pgdyno.report import content, html
from pgdyno.report.load import ReportInput, Selection, load
from pgdyno.results.store import ResultsStore
from pgdyno.stats.waits import series_name

FIXTURE = Path(__file__).parent.parent / "data" / "report" / "results.sqlite"
BUSY = Interference(48.2, 0.0, (("yes", 47.5),))  # a CPU hog took half of the machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as opened:
        yield opened


@pytest.fixture
def stored(tmp_path: Path) -> Callable[[Selection], ReportInput]:
    copy = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, copy)  # opening migrates: never touch the recorded file

    def read(selection: Selection) -> ReportInput:
        with ResultsStore(copy) as store:
            return load(store, selection)

    return read


def _open(browser: Browser, data: ReportInput, path: Path) -> Page:
    report = content.build(data, "2026-11-27T00:00:00+00:00", "test")
    sets = {s.name: s for s in data.comparison.sets} if data.comparison else None
    path.write_text(html.render(report, sets), encoding="utf-8")
    page = browser.open(path, wait_for="window.reportReady === true")
    assert page.console_errors == []
    return page


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(ARTIFACTS / name)


# The visible rows of a table, as text, with each cell's colour and style.
ROWS = """
(selector => Array.from(document.querySelectorAll(selector + ' tbody tr')).map(tr =>
  Array.from(tr.children).map(td => ({text: td.innerText.trim(),
    colour: getComputedStyle(td).color, style: getComputedStyle(td).fontStyle}))))
"""


def test_a_busy_hosts_flagged_figures_are_greyed_with_the_reason(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=1))
    busy = replace(data, runs=[replace(r, interference=BUSY) if r.set_name == "large-wal"
                               else r for r in data.runs])  # fmt: skip
    page = _open(browser, busy, tmp_path / "busy.html")
    rows = page.evaluate(f"({ROWS})('#summary table.summary')")
    flagged = [row for row in rows if row[1]["text"] == "large-wal"]
    clean = [row for row in rows if row[1]["text"] == "small-wal"]
    assert len(flagged) == 2 and len(clean) == 2
    for row in flagged:  # the runs the TPS chart plots, their figures greyed beside it
        median, p99 = row[3], row[6]
        assert median["text"] != "-" and float(median["text"].replace(",", "")) > 0
        assert p99["text"] != "-"
        assert median["colour"] != clean[0][3]["colour"] and median["style"] == "italic"
        assert row[8]["text"] == "not judged"
        assert "flagged for interference" in row[9]["text"]
        assert "other processes took 48.2% of the CPUs (yes 47.5%)" in row[9]["text"]
    assert page.evaluate("document.getElementById('tps-clients-0').dataset.drawn") == "yes"
    _shot(page, "report-flagged.png")


def test_a_ladder_whose_runs_were_all_flagged_is_drawn_greyed_with_the_reason(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=2))
    busy = replace(data, runs=[replace(r, interference=BUSY) for r in data.runs])
    report = content.build(busy, "now", "test")
    (ladder,) = report["ladders"]
    assert ladder["judged"] is False and "flagged for interference" in ladder["reason"]
    assert [s["name"] for s in ladder["steps"]] == ["defaults", "no-jit", "bigger-buffers"]
    page = _open(browser, busy, tmp_path / "ladder.html")
    drawn = page.evaluate(
        "(el => ({drawn: el.dataset.drawn, bars: el.querySelectorAll('.barlayer .point').length,"
        " title: el.querySelector('.gtitle').textContent,"
        " caption: el.closest('figure').querySelector('figcaption').innerText}))"
        "(document.getElementById('ladder-0'))"
    )
    assert drawn["drawn"] == "yes" and drawn["bars"] == 4  # three steps and the total
    assert "not judged" in drawn["title"]
    assert "every run of every step was flagged for interference" in drawn["caption"]
    said = page.evaluate("document.querySelector('.ladder-reason').innerText")
    assert "No verdict for this ladder" in said and "48.2%" in said
    _shot(page, "report-ladder-flagged.png")


def _on_device(run: StoredRun, name: str) -> StoredRun:
    """The run as if its cluster (data and WAL) had lived on device `name`, as a storage set
    puts it (docs/storage.md): the sampler then names its disk figures after that device."""
    layout = run.devices
    assert layout.data is not None
    old = f"disk.{layout.data.name}."
    found = (("data", layout.data), ("wal", layout.wal))
    moved = {role: replace(d, name=name, disk=name, source=f"/dev/{name}")
             for role, d in found if d is not None}  # fmt: skip
    samples = {(f"disk.{name}." + k[len(old) :] if k.startswith(old) else k): v
               for k, v in run.samples.items()}  # fmt: skip
    return replace(run, devices=replace(layout, **moved), samples=samples)


def test_the_disk_chart_draws_every_set_on_its_own_data_device(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=1))
    moved = replace(data, runs=[_on_device(r, "loop7") if r.set_name == "large-wal" else r
                                for r in data.runs])  # fmt: skip
    page = _open(browser, moved, tmp_path / "devices.html")
    traces = page.evaluate(
        "document.getElementById('cell-0-disk').data.map(t => ({group: t.legendgroup,"
        " name: t.name, points: t.y.length}))"
    )
    assert {t["group"] for t in traces} == {"small-wal", "large-wal"}
    assert all(t["points"] > 0 for t in traces)
    legend = page.evaluate(
        "Array.from(document.querySelectorAll('#cell-0-disk .legendtext')).map(e => e.textContent)"
    )
    assert legend == ["small-wal (data vda)", "large-wal (data loop7)"]
    ytitle = page.evaluate("document.querySelector('#cell-0-disk .ytitle').textContent")
    assert ytitle == "data device MB/s"  # the legend names each set's device
    _shot(page, "report-devices.png")


def test_five_sets_get_one_cpu_plot_each(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=1))
    cell = [r for r in data.runs if r.clients == 1]  # four runs of one cell, and a fifth
    runs = [replace(r, set_name=f"set-{i}") for i, r in enumerate(cell)]
    runs.append(replace(cell[0], id=max(r.id for r in data.runs) + 1, set_name="set-4"))
    five = replace(data, runs=runs, comparison=None, by="set", title="five sets")
    page = _open(browser, five, tmp_path / "five.html")
    plots = page.evaluate(
        """(el => {
          const per = {};
          for (const t of el.data) {
            const key = t.xaxis + t.yaxis;
            (per[key] = per[key] || {groups: new Set(), lines: 0}).lines += 1;
            per[key].groups.add(t.line.color);
          }
          return Object.values(per).map(p => ({lines: p.lines, colours: p.groups.size}));
        })(document.getElementById('cell-0-cpu'))"""
    )
    assert len(plots) == 10  # CPU and memory for each of the five sets
    assert all(p["colours"] == 1 and p["lines"] <= 4 for p in plots), plots
    titles = page.evaluate(
        "Array.from(document.querySelectorAll('#cell-0-cpu .infolayer text'))"
        ".map(e => e.textContent)"
    )
    assert sum(any(f"set-{i}" in t for t in titles) for i in range(5)) == 5
    _shot(page, "report-five-sets.png")


# Per drawn chart: the boxes of its legend, its x-axis titles and its plotting areas.
BOXES = """
(id => {
  const el = document.getElementById(id);
  const box = e => { const r = e.getBoundingClientRect();
                     return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {legend: el.querySelector('.legend') ? box(el.querySelector('.legend')) : null,
          xtitles: Array.from(el.querySelectorAll('.g-xtitle text, .g-x2title text')).map(box),
          plots: Array.from(el.querySelectorAll('rect.nsewdrag')).map(box)};
})
"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
                or a["right"] <= b["left"] or b["right"] <= a["left"])  # fmt: skip


def _sampled(run: StoredRun) -> StoredRun:
    """The run as if its wait events had been sampled: active sessions by wait type each
    second of pgbench's log, as collect/waits.py names the series."""
    samples = dict(run.samples)
    for wait_type, background, value in (("CPU*", False, 1.2), ("IO", False, 0.5),
                                         ("LWLock", False, 0.3), ("IO", True, 0.2)):  # fmt: skip
        samples[series_name(wait_type, background=background)] = {
            row.t: value for row in run.seconds
        }
    return replace(run, samples=samples)


def test_legends_sit_beside_their_plots_never_over_an_axis_title(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=1))
    page = _open(browser, replace(data, runs=[_sampled(r) for r in data.runs]),
                 tmp_path / "legends.html")  # fmt: skip
    for chart in ("cell-0-timeline", "cell-0-waits", "cell-0-disk", "cell-0-cpu", "cell-0-worst"):
        boxes = page.evaluate(f"({BOXES})('{chart}')")
        legend = boxes["legend"]
        assert legend is not None, chart
        for title in boxes["xtitles"]:
            assert not _overlap(legend, title), (chart, legend, title)
        # No blank band between the legend and the plots it names.
        nearest = min(abs(p["top"] - legend["bottom"]) for p in boxes["plots"])
        assert nearest <= 24, (chart, nearest)
    _shot(page, "report-legends.png")


def test_across_cells_says_bars_when_it_draws_bars(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=2))  # one client count: one bar per set
    page = _open(browser, data, tmp_path / "bars.html")
    found = page.evaluate(
        "(el => ({bars: el.querySelectorAll('.barlayer .point').length,"
        " lines: el.querySelectorAll('.scatterlayer .js-line').length,"
        " caption: el.closest('figure').querySelector('figcaption').innerText}))"
        "(document.getElementById('tps-clients-0'))"
    )
    assert found["bars"] == 3 and found["lines"] == 0
    assert "one bar per group" in found["caption"] and "line" not in found["caption"]


def test_a_bench_sessions_page_speaks_of_no_comparison(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(run_ids=(1, 3, 5, 7)))  # one session's runs, one group
    page = _open(browser, data, tmp_path / "session.html")
    text = page.evaluate("document.body.innerText").lower()
    for word in ("verdict", "baseline", "bonferroni", "error control"):
        assert word not in text, word
    summary = page.evaluate("document.getElementById('summary').innerText")
    assert "Nothing is compared here" in summary and "pgdyno compare" in summary
    _shot(page, "report-session.png")


def _measured_end(run: StoredRun) -> tuple[float, float]:
    """(end of the last whole second of pgbench's log, end of the last second any series
    measured), in seconds since the run's first measured second."""
    seconds = [row.t for row in run.seconds]
    sampled = [t for name, s in run.samples.items() if name != PROGRESS_METRIC for t in s]
    t0 = min(seconds + sampled)
    return max(seconds) + 1 - t0, max(seconds + sampled) + 1 - t0


def test_timelines_keep_every_measured_second(
    stored: Callable[[Selection], ReportInput], browser: Browser, tmp_path: Path
) -> None:
    data = stored(Selection(comparison_id=1))
    report = content.build(data, "now", "test")
    page = _open(browser, data, tmp_path / "seconds.html")
    by_id = {r.id: r for r in data.runs}
    for cell in report["cells"]:
        ends = {g: _measured_end(by_id[i]) for g, i in cell["representatives"].items()}
        last = max(end for _, end in ends.values())
        for kind in ("timeline", "disk", "cpu"):
            chart = f"{cell['id']}-{kind}"
            shown: Any = page.evaluate(
                f"(el => [el._fullLayout.xaxis.range, el.data.filter(t => t.mode === 'lines')"
                f".map(t => [t.legendgroup, t.name, Math.max(...t.x)])])"
                f"(document.getElementById('{chart}'))"
            )
            axis, traces = shown
            assert axis[0] == 0 and axis[1] >= last, (chart, axis, last)
            if kind == "timeline":
                tps = {g: x for g, name, x in traces if name in ("TPS", g)}
                for group, (log_end, _) in ends.items():
                    assert tps[group] == log_end, (chart, group)
