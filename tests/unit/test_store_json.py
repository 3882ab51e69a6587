"""The JSON the commands print from the results store, pinned: every key pinned keeps its value
and its place among the others (conftest.keeps_old_keys); keys added since are allowed (issue 32:
a new key no longer means pinning every file again). The CSV is still pinned byte for byte.

The expected files under tests/data/store/pinned/ were written from
tests/data/report/results.sqlite (two real comparisons) by pgdyno as it was when the store still
returned rows as dicts; the store now returns frozen records whose JSON (results/encode.py's
`to_json`) must give the same keys, order and values (`runs show --json`, `runs list
--json`, `compare --json`, and the report's JSON and CSV). Issue 21 added two keys and changed
nothing else: each run's `"tpcc"` (null but for the TPC-C-like workload) and each comparison
result's `"figure"` ("tps", or "nopm"), which the report's JSON and its CSV (last column) carry
too. Issue 22 added each `runs list` row's `"host"` (the hostname of its session's host, "" when not
recorded) and the report's `"grouped_by"` and `"differences"` (with a note per difference):
the digest is of the report without them, and they are checked beside it. Issue 24 added each
run's `"waits"` (its wait-event profile, null for these runs, recorded before it existed), each
comparison result's `"max_ms"`, `"worst_ms"` (the runs' worst transactions) and
`"wait_changes"` (empty here), and each comparison run's `"latency_max_ms"`; to the report it
added `"wait_changes"` and `"wait_profiles"` (empty here) and each drill-down run's `"waits"`
(null here): the digest is of the report without them, and they are checked beside it. Issue 31
redrew the charts (each second drawn at its end, one time range per cell, legends above the
plots, the disk chart per set's own device, CPU small multiples) and added the report's
`"comparing"`, each summary row's `"flagged"` and each ladder's `"judged"` and `"reason"`: the
digests were pinned again, once the report without its charts and those keys was checked to be
the same as before. It also prints each drill-down run's `"settings"` and `"settings_diff"` as
SHOW does ("128MB", not "16384 8kB"): checked beside the digest, which is of the raw ones.
It also added each `runs list` row's `"comparison_id"` and `"set_name"`
(last, null for a bench's run): the pinned lists were written again with them, every other key
and value checked unchanged. Issue 32 wrote out the report JSON the digests are of
(report_*.json, their digests still checked), so that the report too is checked key by key.
Issue 33 split the plan's error between TPS (4%) and p99 (1%): every interval, its level and the
planning figures of these comparisons moved with it, and each change gained the adaptive
method's fields (null or false for these fixed-round comparisons); the files were written again
from these comparisons, and checked to differ in those values and keys only.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import keeps_old_keys, schema_1_database
from pgdyno.errors import StoreUnavailable
from pgdyno.postgres.settings import shown_settings
from pgdyno.report import content
from pgdyno.report.drilldown import settings_diff
from pgdyno.report.export import summary_csv
from pgdyno.report.load import Selection, load
from pgdyno.results.encode import to_json
from pgdyno.results.store import ResultsStore
from pgdyno.stats.analysis import analyse
from pgdyno.textsafe import strict_json

DATA = Path(__file__).parent.parent / "data"
PINNED = DATA / "store" / "pinned"


@pytest.fixture
def store(tmp_path: Path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(DATA / "report" / "results.sqlite", copy)  # opening migrates: use a copy
    with ResultsStore(copy) as opened:
        yield opened


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} in JSON output")


def _same(got: str, name: str) -> None:
    """`got` is strict JSON that keeps every key and value of the pinned file `name`."""
    keeps_old_keys(json.loads(got, parse_constant=_refuse), json.loads((PINNED / name).read_text()))


def test_runs_show_json_is_unchanged(store: ResultsStore) -> None:
    ids = [r.id for r in store.list_runs(None)]
    assert len(ids) == 14
    runs = [store.get_run(i) for i in ids]
    _same(strict_json([to_json(r) for r in runs if r]) + "\n", "runs_show.json")


def test_runs_list_json_is_unchanged(store: ResultsStore) -> None:
    _same(strict_json([to_json(r) for r in store.list_runs(None)]) + "\n", "runs_list.json")
    session_1 = [to_json(r) for r in store.list_runs(3, 1)]
    _same(strict_json(session_1) + "\n", "runs_list_session.json")


@pytest.mark.parametrize("comparison_id", [1, 2])
def test_compare_json_is_unchanged(store: ResultsStore, comparison_id: int) -> None:
    info = store.comparisons.get(comparison_id)
    runs = store.comparisons.runs(comparison_id)
    assert info is not None
    analysis = analyse(runs, [s.name for s in info.sets], info.baseline, info.mode)
    got = {"comparison": to_json(info), "analysis": analysis.as_dict(),
           "runs": [to_json(r) for r in runs]}  # fmt: skip
    _same(strict_json(got) + "\n", f"compare_{comparison_id}.json")


@pytest.mark.parametrize(
    ("name", "selection"),
    [
        ("comparison_1", Selection(comparison_id=1)),
        ("comparison_2", Selection(comparison_id=2)),
        ("runs_1_2_9", Selection(run_ids=(1, 2, 9, 500))),
    ],
)
def test_report_json_and_csv_are_unchanged(
    store: ResultsStore, name: str, selection: Selection
) -> None:
    report = content.build(load(store, selection), "2026-11-21T00:00:00+00:00", "test")
    assert summary_csv(report) == (PINNED / f"report_{name}.csv").read_text(), f"{name} CSV changed"
    digests = dict(
        reversed(line.split()) for line in (PINNED / "report_json.sha256").read_text().splitlines()
    )
    added = {"grouped_by": report.pop("grouped_by"), "differences": report.pop("differences")}
    assert report.pop("wait_changes") == [] and report.pop("wait_profiles") == []
    assert [run.pop("waits") for run in report["runs"]] == [None] * len(report["runs"])
    for run in report["runs"]:  # settings as SHOW prints them; the digest is of the raw ones
        stored = store.get_run(run["id"])
        assert stored is not None and run["settings"] == shown_settings(stored.settings)
        run["settings"] = dict(stored.settings)
        if run["settings_diff"]:
            baseline = store.get_run(run["settings_baseline_run"])
            assert baseline is not None
            run["settings_diff"] = settings_diff(stored.settings, baseline.settings)
    notes = report["notes"]
    report["notes"] = [n for n in notes if not n.startswith("not the same in every group")]
    pinned = (PINNED / f"report_{name}.json").read_text()
    assert hashlib.sha256(pinned.encode()).hexdigest() == digests[f"report_{name}.json"]
    _same(strict_json(report), f"report_{name}.json")
    assert added["grouped_by"] == ("set" if selection.comparison_id else None)
    assert len(notes) - len(report["notes"]) == len(
        {(d["what"], str(d["values"])) for d in added["differences"]}
    )


def test_a_run_stored_by_schema_1_prints_as_before(tmp_path: Path) -> None:
    """Columns added later read back as null, health and devices included."""
    path = tmp_path / "old.sqlite"
    schema_1_database(path)
    with ResultsStore(path) as store:
        run = store.get_run(1)
        listed = store.list_runs()
    assert run is not None
    _same(strict_json(to_json(run), indent=None), "run_schema_1.json")
    _same(strict_json([to_json(r) for r in listed], indent=None), "list_schema_1.json")


@pytest.mark.parametrize(
    ("damage", "read", "named"),
    [
        ("UPDATE runs SET health = '[1]' WHERE id = 3", "run", "run 3's health"),
        ("UPDATE sessions SET host = '5' WHERE id = 1", "run", "session 1's host"),
        ("UPDATE comparisons SET scales = '7' WHERE id = 1", "comparison", "comparison 1's scales"),
    ],
)
def test_a_json_column_of_the_wrong_shape_is_named(
    store: ResultsStore, damage: str, read: str, named: str
) -> None:
    """Valid JSON of another shape is damage too: one sentence, not a TypeError later."""
    store.db.conn.execute(damage)
    with pytest.raises(
        StoreUnavailable, match=rf"{named} in the results database holds .* belongs"
    ):
        if read == "run":
            store.get_run(3)
        else:
            store.comparisons.get(1)


@pytest.mark.parametrize(
    ("got", "passes"),
    [
        ({"a": 1, "new": 0, "b": [1.5, {"c": None}]}, True),  # a key added: allowed
        ({"a": 1, "b": [1.5, {"c": None, "d": 2}]}, True),
        ({"a": 2, "b": [1.5, {"c": None}]}, False),  # a value changed
        ({"a": 1.0, "b": [1.5, {"c": None}]}, False),  # 1 printed as 1.0
        ({"b": [1.5, {"c": None}], "a": 1}, False),  # the old keys reordered
        ({"a": 1, "b": [1.5]}, False),  # an item gone
        ({"a": 1, "b": [1.5, {}]}, False),  # a key gone
    ],
)
def test_old_keys_keep_their_values(got: object, passes: bool) -> None:
    old = {"a": 1, "b": [1.5, {"c": None}]}
    if passes:
        keeps_old_keys(got, old)
    else:
        with pytest.raises(AssertionError):
            keeps_old_keys(got, old)
