"""The report's wait-event chart, tables and drill-down rows (report/waits.py).

The figure builder is checked on constructed series; the tables and the page on the recorded
comparison of tests/data/report/results.sqlite (see record.py there), its runs given wait
series and profiles as a sampled run has them (collect/waits.py's shapes).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pgdyno.records.stored import StoredRun
from pgdyno.records.waits import BackgroundWait, WaitProfile, WaitShare
from pgdyno.report import content, html
from pgdyno.report.charts import Series
from pgdyno.report.load import ReportInput, Selection, load
from pgdyno.report.waits import (
    OTHER_COLOURS,
    WAIT_COLOURS,
    sessions_by_type,
    stack_order,
    type_colour,
)
from pgdyno.results.store import ResultsStore
from pgdyno.stats.waits import series_name

FIXTURE = Path(__file__).parent.parent / "data" / "report" / "results.sqlite"
SECONDS = range(0, 10)


def _points(value: float) -> list[tuple[float, float]]:
    return [(float(t), value) for t in SECONDS]


def _series(group: str, colour: str, background: bool = True, **extra: Any) -> Series:
    values = {
        "tps": [(float(t), 500.0) for t in range(1, 9)],
        series_name("LWLock"): _points(0.5),
        series_name("CPU*"): _points(1.25),
        series_name("IO"): _points(0.25),
    }
    if background:
        values[series_name("IO", background=True)] = _points(0.1)
    return Series(group, colour, values, **extra)


def _by_row(figure: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for trace in figure["data"]:
        if "stackgroup" in trace:
            rows.setdefault(trace["yaxis"], []).append(trace)
    return rows


def test_one_run_stacks_its_types_in_a_fixed_order_with_their_colours() -> None:
    checkpoint = {"x0": 3.0, "x1": 5.5, "text": "checkpoint: buffers written 120"}
    figure = sessions_by_type([_series("defaults", "#000000", checkpoints=(checkpoint,))], "t")
    assert figure is not None
    rows = _by_row(figure)
    assert list(rows) == ["y", "y2"]  # client backends, then the background processes
    clients, background = rows["y"], rows["y2"]
    assert [t["name"] for t in clients] == ["CPU*", "IO", "LWLock"]  # CPU* at the bottom
    assert {t["stackgroup"] for t in clients} == {"row1"}
    assert [t["y"] for t in clients] == [[1.25] * 10, [0.25] * 10, [0.5] * 10]
    assert [t["name"] for t in background] == ["IO"] and background[0]["stackgroup"] == "row2"
    for trace in clients + background:
        assert trace["line"]["color"] == trace["fillcolor"] == WAIT_COLOURS[trace["name"]]
    # One legend entry per type: IO's background area follows its client area's.
    assert [t["showlegend"] for t in clients + background] == [True, True, True, False]
    assert all(t["legendgroup"] == t["name"] for t in clients + background)
    layout = figure["layout"]
    (top_low, top_high), (bottom_low, bottom_high) = (
        layout["yaxis"]["domain"], layout["yaxis2"]["domain"]
    )  # fmt: skip
    assert top_high == 1.0 and bottom_low == 0.0 and bottom_high < top_low
    assert (bottom_high - bottom_low) < (top_high - top_low)  # the background row is smaller
    assert layout["yaxis"]["title"]["text"] == "active sessions"
    assert layout["xaxis2"]["matches"] == "x" and layout["xaxis2"]["showticklabels"] is True
    assert layout["xaxis"]["showticklabels"] is False
    # Every timeline of a cell spans the same seconds: from 0 to the end of the last second any
    # series (here the wait series, past the TPS) or checkpoint reaches.
    assert layout["xaxis"]["range"] == [0.0, 9.0]
    # The checkpoint spans both rows of the run; its marker sits on an axis over the first.
    (span,) = layout["shapes"]
    assert (span["x0"], span["x1"], span["y0"], span["y1"]) == (3.0, 5.5, 0.0, 1.0)
    (marker,) = [t for t in figure["data"] if t["mode"] == "markers"]
    assert marker["yaxis"] == "y3" and layout["yaxis3"]["overlaying"] == "y"
    assert marker["text"] == ["checkpoint: buffers written 120"]


def test_each_group_gets_its_rows_and_a_type_keeps_its_colour_across_them() -> None:
    figure = sessions_by_type(
        [_series("small-wal", "#111111"), _series("large-wal", "#222222", background=False)], "t"
    )
    assert figure is not None
    rows = _by_row(figure)
    assert list(rows) == ["y", "y2", "y3"]  # small-wal clients and background, large-wal
    colours = {(t["name"], t["fillcolor"]) for r in rows.values() for t in r}
    assert colours == {(n, WAIT_COLOURS[n]) for n in ("CPU*", "IO", "LWLock")}
    assert len({t["stackgroup"] for r in rows.values() for t in r}) == 3
    titles = [figure["layout"][a]["title"]["text"] for a in ("yaxis", "yaxis2", "yaxis3")]
    assert titles == [
        "small-wal<br>active sessions", "small-wal<br>background",
        "large-wal<br>active sessions",
    ]  # fmt: skip
    assert sum(t["showlegend"] for r in rows.values() for t in r) == 3
    assert "shapes" not in figure["layout"]  # no checkpoint in these runs


def test_no_chart_without_wait_series() -> None:
    plain = Series("defaults", "#000000", {"tps": [(0.0, 1.0), (1.0, 2.0)]})
    assert sessions_by_type([plain], "t") is None
    assert sessions_by_type([], "t") is None


def test_colours_are_fixed_and_unknown_types_still_get_one() -> None:
    assert type_colour("CPU*") == WAIT_COLOURS["CPU*"]
    assert len(set(WAIT_COLOURS.values())) == len(WAIT_COLOURS)
    assert type_colour("SomethingNew") in OTHER_COLOURS
    assert stack_order(["Zeta", "IPC", "CPU*", "Alpha"]) == ["CPU*", "IPC", "Alpha", "Zeta"]


# -- in the report -----------------------------------------------------------------------------


def _profile(cpu: float, wal: float, db_time_s: float) -> WaitProfile:
    top = (WaitShare("CPU*", cpu, cpu * 2), WaitShare("LWLock:WALWrite", wal, wal * 2),
           WaitShare("IO:WalSync", 1 - cpu - wal, (1 - cpu - wal) * 2))  # fmt: skip
    by_type = (("CPU*", cpu), ("LWLock", wal), ("IO", 1 - cpu - wal))
    background = (BackgroundWait("checkpointer", "IO:DataFileSync", 0.3),)
    return WaitProfile("pg_stat_activity", 10.0, 600, db_time_s, by_type, top, 0.0, background)


def _sampled(run: StoredRun) -> StoredRun:
    """The run as if sampled: per-second AAS of three types, and a profile; the large-wal set
    waits less on WALWrite than the baseline."""
    small = run.set_name == "small-wal"
    cpu, wal = (0.5, 0.3) if small else (0.7, 0.1)
    seconds = [row.t for row in run.seconds]
    samples = dict(run.samples)
    for name, value in ((series_name("CPU*"), cpu * 2), (series_name("LWLock"), wal * 2),
                        (series_name("IO"), (1 - cpu - wal) * 2),
                        (series_name("IO", background=True), 0.3)):  # fmt: skip
        samples[name] = dict.fromkeys(seconds, value)
    return replace(run, samples=samples, waits=_profile(cpu, wal, 20.0))


@pytest.fixture
def sampled(tmp_path: Path) -> ReportInput:
    copy = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, copy)  # opening migrates: never touch the recorded file
    with ResultsStore(copy) as store:
        data = load(store, Selection(comparison_id=1))
    return replace(data, runs=[_sampled(r) for r in data.runs])


def test_the_report_draws_waits_under_the_timeline_and_tables_the_changes(
    sampled: ReportInput,
) -> None:
    report = content.build(sampled, "2026-11-26T00:00:00+00:00", "test")
    for cell in report["cells"]:
        kinds = [c["id"].rsplit("-", 1)[1] for c in cell["charts"]]
        assert kinds[:2] == ["timeline", "waits"]
        waits = cell["charts"][1]["figure"]
        timeline = cell["charts"][0]["figure"]
        seconds = [x for t in timeline["data"] for x in t["x"]]
        seconds += [s[k] for s in timeline["layout"].get("shapes", ()) for k in ("x0", "x1")]
        assert waits["layout"]["xaxis"]["range"] == timeline["layout"]["xaxis2"]["range"]
        assert waits["layout"]["xaxis"]["range"][1] >= max(seconds)
        assert sum(t["name"] == "small-wal" for t in waits["data"] if t["mode"] == "markers") == 1
        assert len(_by_row(waits)) == 4  # two sets, clients and background each
    # Per cell, large-wal against small-wal: the events that moved, largest first; IO:WalSync
    # has 20% in both (1 - 0.5 - 0.3 and 1 - 0.7 - 0.1, equal but for float rounding): no row.
    rows = report["wait_changes"]
    assert {r["group"] for r in rows} == {"large-wal"}
    assert len(rows) == 2 * len(report["cells"])
    assert "IO:WalSync" not in {r["event"] for r in rows}
    first = rows[0]
    assert first["event"] in ("CPU*", "LWLock:WALWrite")
    wal = next(r for r in rows if r["event"] == "LWLock:WALWrite")
    assert (wal["baseline_pct"], wal["group_pct"]) == pytest.approx((30.0, 10.0))
    assert wal["change_points"] == pytest.approx(-20.0)
    assert wal["colour"] == WAIT_COLOURS["LWLock"]
    profiles = report["wait_profiles"]
    assert [p["group"] for p in profiles[:2]] == ["small-wal", "large-wal"]
    assert [(t["type"], t["share_pct"]) for t in profiles[0]["types"]] == [
        ("CPU*", 50.0), ("LWLock", 30.0), ("IO", 20.0),
    ]  # fmt: skip
    assert profiles[0]["db_time_s"] == 20.0 * profiles[0]["runs"]
    run = report["runs"][0]
    assert [w["event"] for w in run["waits"]["top"]] == ["CPU*", "LWLock:WALWrite", "IO:WalSync"]
    assert any(c["id"] == f"run-{run['id']}-waits" for c in run["charts"])
    page = html.render(report)
    assert 'id="waits"' in page and "Wait events whose share changed most" in page
    assert "LWLock:WALWrite" in page and "-20.0" in page
    assert "Top wait events" in page


def test_runs_without_profiles_leave_the_wait_section_out(tmp_path: Path) -> None:
    copy = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, copy)
    with ResultsStore(copy) as store:
        report = content.build(load(store, Selection(comparison_id=1)), "now", "test")
    assert report["wait_changes"] == [] and report["wait_profiles"] == []
    assert not any(c["id"].endswith("-waits") for cell in report["cells"] for c in cell["charts"])
    page = html.render(report)
    assert 'id="waits"' not in page and "Top wait events" not in page
