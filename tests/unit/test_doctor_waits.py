"""The doctor's table of wait events and the rules that speak to them (doctor/wait_rules.toml)."""

from __future__ import annotations

import re

from pgdyno.doctor.rules import load_rules
from pgdyno.doctor.waits import MIN_SHARE, cite, wait_rules
from pgdyno.records.waits import WaitProfile, WaitShare

EVENT = re.compile(r"^[A-Z][A-Za-z]+:[A-Za-z]+$")


def test_every_rule_named_exists_and_every_event_is_named_once() -> None:
    known = {rule.id for rule in load_rules()}
    names = [name for entry in wait_rules() for name in entry.names]
    assert len(names) == len(set(names))
    assert all(EVENT.match(name) for name in names), names
    for entry in wait_rules():
        assert entry.rules and set(entry.rules) <= known, entry


def test_small_events_are_left_out_and_fired_rules_told_from_passed() -> None:
    found = WaitProfile("pg_stat_activity", 10.0, 100, 10.0, (), (
        WaitShare("LWLock:WALWrite", 0.5, 2.0), WaitShare("IO:DataFileRead", MIN_SHARE, 0.4),
        WaitShare("Lock:tuple", MIN_SHARE / 2, 0.2),
    ))  # fmt: skip
    cited = {c.event: c for c in cite(found, {"wal-buffers-small", "cache-hit-low"})}
    assert set(cited) == {"LWLock:WALWrite", "IO:DataFileRead"}
    wal = cited["LWLock:WALWrite"]
    assert wal.fired == ("wal-buffers-small",) and "wal-on-data-device" in wal.passed
    assert cited["IO:DataFileRead"].fired == ("cache-hit-low",)
