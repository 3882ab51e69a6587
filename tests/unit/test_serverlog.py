"""Checkpoint events from real server logs of PostgreSQL 14 to 18 (tests/data/serverlog)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pgdyno.postgres.serverlog import (
    CheckpointEvent,
    LogTail,
    parse_checkpoint_line,
    parse_checkpoint_log,
)

DATA = Path(__file__).parent.parent / "data" / "serverlog"
LOGS = ["pg14", "pg15", "pg16", "pg17", "pg18", "pg18_standby"]


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def lines(name: str) -> list[str]:
    return (DATA / f"{name}.log").read_text().splitlines()


def events(name: str) -> list[CheckpointEvent]:
    return parse_checkpoint_log(lines(name))


# The first time-triggered pair of each log, copied by hand from the file.
FIRST_TIMED = {
    "pg14": (
        "2026-11-21 13:40:27.053",
        CheckpointEvent(
            at("2026-11-21 13:40:54.061"), "complete", "checkpoint", "time",
            buffers=1082, buffers_pct=6.6, wal_added=0, wal_removed=0, wal_recycled=0,
            write_s=27.005, sync_s=0.002, total_s=27.009, sync_files=8, sync_longest_s=0.001,
            sync_average_s=0.001, distance_kb=9842, estimate_kb=22877,
        ),
    ),
    "pg15": (
        "2026-11-21 13:41:52.022",
        CheckpointEvent(
            at("2026-11-21 13:42:19.098"), "complete", "checkpoint", "time",
            buffers=475, buffers_pct=2.9, wal_added=0, wal_removed=0, wal_recycled=0,
            write_s=27.073, sync_s=0.002, total_s=27.077, sync_files=8, sync_longest_s=0.001,
            sync_average_s=0.001, distance_kb=4325, estimate_kb=25197,
        ),
    ),
    "pg16": (
        "2026-11-21 13:43:15.041",
        CheckpointEvent(
            at("2026-11-21 13:43:42.029"), "complete", "checkpoint", "time",
            buffers=1389, buffers_pct=8.5, wal_added=0, wal_removed=0, wal_recycled=0,
            write_s=26.986, sync_s=0.002, total_s=26.989, sync_files=8, sync_longest_s=0.001,
            sync_average_s=0.001, distance_kb=12421, estimate_kb=32388,
            lsn="0/FF29470", redo_lsn="0/FC236A0",
        ),
    ),
    "pg17": (
        "2026-11-21 13:45:03.099",
        CheckpointEvent(
            at("2026-11-21 13:45:23.951"), "complete", "checkpoint", "time",
            buffers=376, buffers_pct=2.3, wal_added=0, wal_removed=0, wal_recycled=0,
            write_s=20.847, sync_s=0.002, total_s=20.852, sync_files=8, sync_longest_s=0.001,
            sync_average_s=0.001, distance_kb=3208, estimate_kb=35809,
            lsn="0/11229278", redo_lsn="0/10323308",
        ),
    ),
    "pg18": (
        "2026-11-21 13:46:27.075",
        CheckpointEvent(
            at("2026-11-21 13:46:47.685"), "complete", "checkpoint", "time",
            buffers=428, buffers_pct=2.6, slru_buffers=1, wal_added=0, wal_removed=0,
            wal_recycled=0, write_s=20.605, sync_s=0.002, total_s=20.610, sync_files=8,
            sync_longest_s=0.001, sync_average_s=0.001, distance_kb=3697, estimate_kb=39560,
            lsn="0/F36ACB8", redo_lsn="0/E39CD68",
        ),
    ),
    "pg18_standby": (
        "2026-11-21 13:50:32.054",
        CheckpointEvent(
            at("2026-11-21 13:50:59.037"), "complete", "restartpoint", "time",
            buffers=1263, buffers_pct=7.7, slru_buffers=1, wal_added=0, wal_removed=1,
            wal_recycled=1, write_s=26.974, sync_s=0.002, total_s=26.984, sync_files=11,
            sync_longest_s=0.001, sync_average_s=0.001, distance_kb=32246, estimate_kb=37365,
            lsn="0/EAD2778", redo_lsn="0/E2CDA78",
        ),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", LOGS)
def test_first_timed_checkpoint_has_the_numbers_of_the_file(name):
    start_at, complete = FIRST_TIMED[name]
    found = events(name)
    first = next(i for i, e in enumerate(found) if e.reason == "time")
    assert found[first] == CheckpointEvent(at(start_at), "start", complete.kind, "time")
    assert found[first + 1] == complete


@pytest.mark.parametrize("name", LOGS)
def test_every_checkpoint_line_is_one_event_and_nothing_else_is(name):
    kind = "restartpoint" if "standby" in name else "checkpoint"
    wanted = [
        line for line in lines(name) if f"{kind} starting:" in line or f"{kind} complete:" in line
    ]
    assert len(wanted) >= 10
    assert len(events(name)) == len(wanted)
    for line in lines(name):
        if line not in wanted:
            assert parse_checkpoint_line(line) is None, line


@pytest.mark.parametrize("name", LOGS)
def test_start_and_complete_alternate_and_complete_takes_the_reason(name):
    found = events(name)
    assert [e.phase for e in found] == ["start", "complete"] * (len(found) // 2)
    assert len(found) % 2 == 0
    for start, complete in zip(found[::2], found[1::2], strict=True):
        assert complete.reason == start.reason
        assert start.kind == complete.kind
        assert start.at <= complete.at
        assert start.buffers is None and complete.buffers is not None
    times = [e.at for e in found]
    assert times == sorted(times)


@pytest.mark.parametrize("name", LOGS)
def test_numbers_of_every_complete_line_are_those_in_the_line(name):
    """Write each event back in the server's own format: it must be part of its line."""
    complete_lines = [line for line in lines(name) if "point complete:" in line]
    complete = [e for e in events(name) if e.phase == "complete"]
    for line, e in zip(complete_lines, complete, strict=True):
        assert line.startswith(datetime.fromtimestamp(e.at, UTC).strftime("%Y-%m-%d %H:%M:%S."))
        assert f"wrote {e.buffers} buffers ({e.buffers_pct:.1f}%)" in line
        assert (
            f"{e.wal_added} WAL file(s) added, {e.wal_removed} removed, "
            f"{e.wal_recycled} recycled" in line
        )
        assert f"write={e.write_s:.3f} s, sync={e.sync_s:.3f} s, total={e.total_s:.3f} s" in line
        assert (
            f"sync files={e.sync_files}, longest={e.sync_longest_s:.3f} s, "
            f"average={e.sync_average_s:.3f} s" in line
        )
        assert f"distance={e.distance_kb} kB, estimate={e.estimate_kb} kB" in line
        if name in ("pg14", "pg15"):
            assert e.lsn is None and e.redo_lsn is None
        else:
            assert f"; lsn={e.lsn}, redo lsn={e.redo_lsn}" in line
        if name.startswith("pg18"):
            assert f"%), wrote {e.slru_buffers} SLRU buffers;" in line
        else:
            assert e.slru_buffers is None


REASONS = {
    "pg14": {
        "wal", "time", "immediate force wait", "immediate force wait wal",
        "immediate force wait flush-all", "shutdown immediate",
    },
    "pg15": {"wal", "time", "immediate force wait wal", "shutdown immediate"},
    "pg16": {"wal", "time", "immediate force wait wal", "shutdown immediate"},
    "pg17": {"wal", "time", "immediate force wait", "shutdown immediate"},
    "pg18": {"wal", "time", "immediate force wait", "shutdown immediate"},
    "pg18_standby": {"wal", "time"},
}  # fmt: skip


@pytest.mark.parametrize("name", LOGS)
def test_reasons(name):
    assert {e.reason for e in events(name)} == REASONS[name]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "2026-11-21 13:44:03.802 UTC [21739] LOG:  checkpoints are occurring too frequently "
        "(0 seconds apart)",
        "2026-11-21 13:44:03.802 UTC [21739] HINT:  Consider increasing the configuration "
        'parameter "max_wal_size".',
        "2026-11-21 13:51:17.545 UTC [24046] LOG:  recovery restart point at 0/121B2FA0",
        # a client's statement that mentions a checkpoint is not one
        "2026-11-21 13:44:03.802 UTC [4242] ERROR:  checkpoint starting: time",
        "2026-11-21 13:44:03.802 UTC [4242] STATEMENT:  SELECT 'LOG:  checkpoint starting: time'",
        # a zone whose offset the line does not give
        "2026-11-21 13:44:03.802 CET [21739] LOG:  checkpoint starting: time",
        "checkpoint starting: time",
    ],
)
def test_unrelated_lines_are_ignored(line):
    assert parse_checkpoint_line(line) is None


def test_numeric_zone_offsets():
    line = "2026-11-21 14:44:03.802 +01 [1] LOG:  checkpoint starting: time"
    event = parse_checkpoint_line(line)
    assert event is not None and event.at == at("2026-11-21 13:44:03.802")


# -- LogTail ---------------------------------------------------------------------------------


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def test_log_tail_reads_what_is_appended_in_steps(tmp_path):
    log = lines("pg18")
    path = tmp_path / "postgresql.log"
    split = [i for i, line in enumerate(log) if "checkpoint starting:" in line][4]
    before, after = log[:split], log[split:]
    path.write_text("\n".join(before) + "\n")
    tail = LogTail(path)
    tail.start()
    assert tail.read_events() == []  # what was there before start() is not reported

    seen: list[CheckpointEvent] = []
    for i in range(0, len(after), 7):  # seven lines at a time
        append(path, "".join(line + "\n" for line in after[i : i + 7]))
        seen += tail.read_events()
    assert seen == parse_checkpoint_log(after)
    assert seen and seen == events("pg18")[len(parse_checkpoint_log(before)) :]
    assert tail.read_events() == []


def test_log_tail_waits_for_the_end_of_a_partial_line(tmp_path):
    path = tmp_path / "postgresql.log"
    log = lines("pg17")
    first = next(i for i, line in enumerate(log) if "starting: time" in line)
    start, complete = log[first], log[first + 1]
    tail = LogTail(path)
    tail.start()  # the file does not exist yet
    assert tail.read_events() == []
    append(path, start + "\n" + complete[:60])
    first = tail.read_events()
    assert [(e.phase, e.reason) for e in first] == [("start", "time")]
    assert tail.read_events() == []  # still no newline
    append(path, complete[60:])
    assert tail.read_events() == []
    append(path, "\n")
    [done] = tail.read_events()
    assert done.phase == "complete" and done.reason == "time" and done.buffers == 376


def test_log_tail_rereads_a_log_that_was_replaced(tmp_path):
    path = tmp_path / "postgresql.log"
    path.write_text("\n".join(lines("pg14")) + "\n")
    tail = LogTail(path)
    tail.start()
    path.write_text("\n".join(lines("pg16")[:10]) + "\n")  # shorter than before
    assert tail.read_events() == parse_checkpoint_log(lines("pg16")[:10])


def test_log_tail_of_a_file_created_after_start(tmp_path):
    path = tmp_path / "log" / "postgresql.log"
    tail = LogTail(path)
    tail.start()
    assert tail.read_events() == []
    path.parent.mkdir()
    path.write_text("\n".join(lines("pg15")) + "\n")
    assert tail.read_events() == events("pg15")
