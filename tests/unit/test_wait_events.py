"""The wait-event descriptions (data/wait_events.toml, pgdyno/wait_events.py)."""

from __future__ import annotations

import pytest

from pgdyno.catalogs.wait_events import (
    WaitEventsError,
    describe_event,
    event_docs,
    parse_wait_events,
    wait_events,
)

# What the issue asks to be named, PostgreSQL 18's asynchronous I/O included.
REQUIRED = (
    "IO:WalSync", "IO:WalWrite", "LWLock:WALWrite", "LWLock:WALInsert", "IO:DataFileRead",
    "IO:DataFileWrite", "IO:DataFileSync", "IO:DataFileExtend", "LWLock:BufferMapping",
    "LWLock:LockManager", "Lock:transactionid", "Lock:tuple", "IPC:CheckpointStart",
    "IPC:CheckpointDone", "IO:AioIoCompletion", "IO:AioIoUringSubmit", "IO:AioIoUringExecution",
    "Activity:IoWorkerMain", "io worker",
)  # fmt: skip
TABLES = "https://www.postgresql.org/docs/current/monitoring-stats.html#WAIT-EVENT-"


@pytest.mark.parametrize("event", REQUIRED)
def test_required_events_are_described_in_one_line_with_their_page(event: str):
    text = describe_event(event)
    assert text is not None and "\n" not in text and len(text) < 300
    assert text[0].isupper() and text.endswith(".")
    assert (event_docs(event) or "").startswith("https://www.postgresql.org/docs/current/")


def test_each_event_cites_the_table_of_its_type():
    for entry in wait_events().values():
        kind, colon, _ = entry.name.partition(":")
        if colon:
            assert entry.docs == f"{TABLES}{kind.upper()}-TABLE", entry.name
        else:  # a process type: the pg_stat_io view, which lists them
            assert entry.docs.endswith("#MONITORING-PG-STAT-IO-VIEW"), entry.name


def test_lookups_forgive_case_spaces_and_underscores():
    assert (
        describe_event("io:walsync")
        == describe_event("IO : WalSync")
        == describe_event("IO:WalSync")
    )
    assert describe_event("io_worker") == describe_event("io worker")
    assert describe_event("IO:WalSyncc") is None and describe_event("") is None
    assert event_docs("nothing") is None


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[[event]]\nname = 'IO:X'\nmeans = 'm'", "give exactly name, means and docs"),
        ("[[event]]\nname = 'IO:X'\nmeans = 'm'\ndocs = 'https://example.org/'", "cite a page"),
        ("[[event]]\nname = 'IO:X'\nmeans = ''\ndocs = 'https://www.postgresql.org/docs/'",
         "non-empty text"),
        ("[[waits]]\nname = 'x'", "unknown table 'waits'"),
        ("[[process]]\nname = 'a'\nmeans = 'm'\ndocs = 'https://www.postgresql.org/docs/'\n"
         "[[process]]\nname = 'A'\nmeans = 'n'\ndocs = 'https://www.postgresql.org/docs/'",
         "'A' is listed twice"),
        ("[[event]", "not valid TOML"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_one_sentence(text: str, complaint: str):
    with pytest.raises(WaitEventsError, match=complaint):
        parse_wait_events(text)
