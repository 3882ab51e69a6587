"""docs/doctor-snapshot.md is generated from the doctor's lists of facts: it is in sync, and the
generator refuses a field that is gathered but not described, or described but not gathered."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pgdyno.doctor.snapshot_doc import (
    COMMAND,
    DESCRIPTIONS,
    SnapshotDocError,
    gathered_fields,
    render,
)
from pgdyno.host.disks import read_devices
from pgdyno.host.machine import read_inventory

REPO = Path(__file__).parents[2]
DOC = REPO / "docs" / "doctor-snapshot.md"
RECORDED = REPO / "tests" / "data" / "hosts" / "firecracker-2cpu"


def descriptions() -> dict[str, Any]:
    return tomllib.loads(DESCRIPTIONS.read_text())


def test_the_doc_is_the_generators_output():
    assert DOC.read_text() == render(descriptions()), f"run: {COMMAND}"


def test_the_doc_keeps_its_prose_and_every_field():
    text = DOC.read_text()
    assert "can fill one in from a\ncustomer's `sysctl -a`" in text
    assert "| `thp_enabled`, `thp_defrag` | string |" in text
    assert "`devices.wal_on_data_device`: true when both live on the same physical disk" in text
    assert "| `cache` | object | summed over databases" in text


def test_gathered_fields_are_what_the_doctor_reads_from_a_recorded_host():
    host, _ = read_inventory(RECORDED / "proc", RECORDED / "sys")
    devices, _ = read_devices(None, Path("/"), RECORDED / "proc", RECORDED / "sys")
    assert tuple(host) == gathered_fields()["host"]
    assert tuple(devices["wal"]) == gathered_fields()["devices"]
    assert gathered_fields()["server"][:4] == ("version_num", "version", "is_superuser", "local")


@pytest.mark.parametrize("section", ["host", "devices", "server"])
def test_a_new_field_without_a_description_stops_the_generator(section: str):
    fields = dict(gathered_fields())
    fields[section] = (*fields[section], "brand_new_fact")
    with pytest.raises(SnapshotDocError, match=r"not described: \['brand_new_fact'\]"):
        render(descriptions(), fields)


def test_a_described_field_no_longer_gathered_stops_the_generator():
    fields = dict(gathered_fields())
    fields["host"] = tuple(f for f in fields["host"] if f != "swappiness")
    with pytest.raises(SnapshotDocError, match=r"not gathered: \['swappiness'\]"):
        render(descriptions(), fields)


def test_a_description_edit_shows_in_the_doc():
    data = copy.deepcopy(descriptions())
    host = next(s for s in data["section"] if s.get("fields") == "host")
    host["row"][0]["about"] = "the kernel's hostname"
    assert "| `hostname` | string | the kernel's hostname |" in render(data)
