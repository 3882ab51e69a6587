"""The verdict table's storage, worst-latency and wait columns, from runs as a comparison
stores them (issue 23: each set's filesystems beside its name, seed 001's worst-case latency;
issue 24: the wait events whose share moved most)."""

from __future__ import annotations

import io

from rich.console import Console

from pgdyno.records.health import RunHealth
from pgdyno.records.stored import RunOutcome
from pgdyno.records.waits import WaitProfile, WaitShare
from pgdyno.stats.analysis import analyse
from pgdyno.terminal.verdict_tables import verdict_table


def _profile(walwrite: float) -> WaitProfile:
    return WaitProfile(
        "pg_stat_activity", 10.0, 200, 20.0, (),
        (WaitShare("CPU*", 1.0 - walwrite, 1.0), WaitShare("LWLock:WALWrite", walwrite, 0.5)),
    )  # fmt: skip


def _runs() -> list[RunOutcome]:
    runs = []
    for round_no in range(1, 5):
        for name, tps, worst, walwrite in (("on", 1000.0, 40.0, 0.31), ("off", 1500.0, 9.0, 0.09)):
            runs.append(
                RunOutcome(
                    len(runs) + 1,
                    name,
                    "ok",
                    "tpcb-like",
                    4,
                    4,
                    round_no,
                    tps + round_no,
                    2.0,
                    1.0,
                    RunHealth(),
                    "18",
                    latency_max_ms=worst * round_no,
                    waits=_profile(walwrite),
                )
            )
    return runs


def _text(storage: dict[str, str] | None) -> str:
    analysis = analyse(_runs(), ["on", "off"], "on", "sets")
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(verdict_table(analysis, "t", storage))
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_the_worst_latency_is_the_median_of_the_runs_maxima_and_the_worst_of_them() -> None:
    result = analyse(_runs(), ["on", "off"], "on", "sets").results[0]
    assert result.max_ms is not None and result.max_ms.median == 100.0  # 40, 80, 120, 160
    assert result.worst_ms == 160.0
    assert "100 (worst 160)" in _text(None)


def test_wait_changes_name_the_events_that_moved_against_the_baseline() -> None:
    on, off = analyse(_runs(), ["on", "off"], "on", "sets").results
    assert on.wait_changes == ()
    moved = {c.event: (round(c.before, 2), round(c.after, 2)) for c in off.wait_changes}
    assert moved == {"LWLock:WALWrite": (0.31, 0.09), "CPU*": (0.69, 0.91)}
    text = _text(None)
    assert "wait share, baseline -> set" in text and "LWLock:WALWrite 31% -> 9%" in text


def test_storage_column_only_when_sets_have_storage() -> None:
    assert "storage" not in _text(None)
    with_storage = _text({"on": "xfs -o noatime on a loop image"})
    assert "storage" in with_storage and "xfs -o noatime on a loop image" in with_storage
    line = next(li for li in with_storage.splitlines() if " off " in li)
    assert " - " in line  # a set without storage of its own
