"""Tune's facts: one frozen record whose fields are the names data/tune.toml may use, read
from a doctor snapshot and nothing else (older snapshots give unknown facts with reasons)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from pgdyno.doctor.snapshot import load_snapshot
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.records.tune import DEVICE_FACTS, FACT_FIELDS
from pgdyno.tune.facts import Given, offline_facts, snapshot_facts
from pgdyno.tune.knowledge import FACT_NAMES, KNOWLEDGE_FILE, KnowledgeError, load_knowledge
from pgdyno.tune.recommend import current_values, recommend

DATA = Path(__file__).parent.parent / "data"
GiB = 1024**3


def test_the_fact_names_are_the_fields_of_the_facts_record() -> None:
    """FACT_NAMES is what a typo is checked against: the fields of TuneFacts and Disk."""
    assert FACT_NAMES["t"] == set(FACT_FIELDS) and FACT_NAMES["device"] == set(DEVICE_FACTS)
    assert {"ram", "cpus", "pg", "data_bytes", "wal_free", "huge_page"} <= FACT_NAMES["t"]
    assert not {"devices", "sources", "unknown"} & FACT_NAMES["t"]
    assert FACT_NAMES["device"] == {"role", "scheduler", "schedulers", "read_ahead_kb"}
    given = Given(profile="oltp", ram_bytes=8 * GiB, cpus=4, pg_version=17, storage="ssd",
                  data_size="mid_ram")  # fmt: skip
    offline = offline_facts(given)
    assert set(offline.known()) | set(offline.unknown) <= FACT_NAMES["t"]


def test_a_fact_that_is_not_a_field_is_refused_with_its_line(tmp_path: Path) -> None:
    """t.data_size is not a field (data_bytes and data_ratio are): refused when read."""
    text = KNOWLEDGE_FILE.read_text()
    old = 'value = "t.connections"'
    line = text[: text.index(old)].count("\n") + 1
    path = tmp_path / "tune.toml"
    path.write_text(text.replace(old, 'value = "t.data_size"'))
    with pytest.raises(KnowledgeError) as caught:
        load_knowledge(path)
    assert str(caught.value) == (
        f"{path} line {line}: setting 'max_connections', value: no fact t.data_size is known"
        "; see docs/tune.md (the knowledge format)."
    )


def test_an_older_snapshot_gives_unknown_facts_with_reasons() -> None:
    """recorded-vm.json predates the schedulers, the WAL free space and the cluster size."""
    snapshot = load_snapshot(DATA / "doctor" / "recorded-vm.json")
    read = snapshot_facts(snapshot, Given(profile="oltp"))
    assert read.ram == 25276502016 and read.pg == 18 and read.storage == "ssd"
    assert (read.wal_free, read.data_bytes, read.data_ratio) == (None, None, None)
    assert "an older pgdyno's snapshot" in read.unknown["wal_free"]
    assert "server.data_bytes" in read.unknown["data_bytes"]
    assert [(d.name, d.role, d.schedulers) for d in read.devices] == [("vda", "data", None)]
    assert "the schedulers of vda" in read.unknown["device.schedulers"]
    config = recommend(read, recorded_settings(18), {})
    assert config.unknown["device:scheduler@vda"].startswith("needs device.schedulers (")
    assert "device:read_ahead_kb@vda" not in config.unknown
    # no WAL space known: left out, with the reason (issue 31)
    assert "max_wal_size" not in config.pg_values()
    assert config.unknown["postgresql:max_wal_size"].startswith("needs wal_free (")


def test_the_facts_are_frozen() -> None:
    facts = offline_facts(Given("web", ram_bytes=8 * GiB))
    with pytest.raises(FrozenInstanceError):
        facts.ram = 1  # type: ignore[misc]


def test_current_values_come_from_the_snapshot() -> None:
    """The host values in effect are the snapshot's, not this machine's."""
    snapshot = load_snapshot(DATA / "doctor" / "recorded-vm.json")
    facts = snapshot_facts(snapshot, Given("oltp"))
    current = current_values(snapshot, facts)
    host = snapshot["host"]
    assert current["vm.swappiness"] == str(host["swappiness"])
    assert current["vm.dirty_bytes"] == str(host["dirty_bytes"])
    assert current["transparent_hugepage/enabled"] == host["thp_enabled"]
    assert current["transparent_hugepage/defrag"] == host["thp_defrag"]
    assert current["read_ahead_kb@vda"] == str(snapshot["devices"]["data"]["read_ahead_kb"])
    assert current["shared_buffers"] == "128MB"
    edited = {**snapshot, "host": {**host, "swappiness": 7}}
    assert current_values(edited, facts)["vm.swappiness"] == "7"
