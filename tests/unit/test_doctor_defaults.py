"""Settings a snapshot leaves out are taken as the defaults of the server's version, and said
to be: the issue's hand-written snapshot of a 256 GB host (tests/data/doctor/handwritten/
big-host-changed-only.json) lists only shared_buffers, max_connections and work_mem."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pgdyno.doctor.defaults import AssumedDefault, server_major, with_defaults
from pgdyno.doctor.evaluate import Audit, audit
from pgdyno.doctor.rules import load_rules
from pgdyno.doctor.snapshot import load_snapshot, scope
from pgdyno.expressions.expr import Unknown
from pgdyno.terminal.doctor import as_data
from pgdyno.textsafe import strict_json

DATA = Path(__file__).parent.parent / "data" / "doctor"
BIG_HOST = DATA / "handwritten" / "big-host-changed-only.json"
RULES = load_rules()


def big_host() -> dict[str, Any]:
    return load_snapshot(BIG_HOST)


def by_id(result: Audit) -> dict[str, Any]:
    return {f.rule.id: f for f in result.findings}


def test_the_issue_example_is_evaluated_with_the_defaults_of_its_version() -> None:
    result = audit(RULES, big_host())
    found = by_id(result)
    assert {"worst-case-memory", "connections-near-limit"} <= set(found)
    # 64 GiB + 1,000 x (2 MiB of its own + 256 MiB x hash_mem_multiplier 2, 16's default)
    # + 3 x 64 MiB
    memory = found["worst-case-memory"]
    assert memory.current == (
        "566.1 GiB worst case against 256 GiB (PostgreSQL 16 defaults: autovacuum_max_workers "
        "= 3, autovacuum_work_mem = -1, hash_mem_multiplier = 2, maintenance_work_mem = 64MB)"
    )
    assert memory.assumed == (
        "autovacuum_max_workers", "autovacuum_work_mem", "hash_mem_multiplier",
        "maintenance_work_mem",
    )  # fmt: skip
    connections = found["connections-near-limit"]
    assert connections.current == (
        "950 of 997 usable connections (PostgreSQL 16 defaults: reserved_connections = 0, "
        "superuser_reserved_connections = 3)"
    )
    assert connections.assumed == ("reserved_connections", "superuser_reserved_connections")
    unchecked = {u.rule.id for u in result.unchecked}
    assert not {"worst-case-memory", "connections-near-limit"} & unchecked


def test_a_finding_on_given_settings_alone_names_no_default() -> None:
    snapshot = big_host()
    snapshot["server"]["settings"].update(
        superuser_reserved_connections={"setting": "3"}, reserved_connections={"setting": "0"},
        autovacuum_work_mem={"setting": "1GB"},
        autovacuum_max_workers={"setting": "3"}, hash_mem_multiplier={"setting": "2.0"},
    )  # fmt: skip
    found = by_id(audit(RULES, snapshot))
    assert found["connections-near-limit"].current == "950 of 997 usable connections"
    assert found["connections-near-limit"].assumed == ()
    assert "default" not in found["worst-case-memory"].current


def test_without_a_version_nothing_is_assumed() -> None:
    snapshot = big_host()
    del snapshot["server"]["version_num"], snapshot["server"]["version"]
    result = audit(RULES, snapshot)
    missing = {u.rule.id: u.missing for u in result.unchecked}
    assert missing["worst-case-memory"] == "pg.autovacuum_max_workers"  # the first it needs
    assert missing["connections-near-limit"] == "pg.superuser_reserved_connections"
    assert result.assumed == {} and all(f.assumed == () for f in result.findings)


def test_the_version_string_is_enough_and_picks_that_versions_defaults() -> None:
    snapshot = big_host()
    del snapshot["server"]["version_num"]
    snapshot["server"]["version"] = "14.11"  # hash_mem_multiplier was 1 before 15
    memory = by_id(audit(RULES, snapshot))["worst-case-memory"]
    assert memory.current.startswith("316.1 GiB worst case against 256 GiB (PostgreSQL 14 ")
    assert "hash_mem_multiplier = 1," in memory.current


def test_an_unrecorded_version_assumes_nothing() -> None:
    snapshot = big_host()
    snapshot["server"]["version_num"] = 130012
    assert with_defaults(snapshot)[1] == {}


def test_a_setting_the_audit_could_not_read_is_not_guessed() -> None:
    snapshot = big_host()
    snapshot["unread"] = {"server.settings.superuser_reserved_connections": "hidden from role"}
    result = audit(RULES, snapshot)
    missing = {u.rule.id: u.missing for u in result.unchecked}
    assert missing["connections-near-limit"] == "pg.superuser_reserved_connections"


def test_filled_settings_are_defaults_in_base_units() -> None:
    original = big_host()
    kept = copy.deepcopy(original)
    filled, assumed = with_defaults(original)
    assert original == kept  # the snapshot itself is left alone
    facts = scope(filled)
    assert facts["pg"].get("maintenance_work_mem") == 64 * 1024**2
    assert facts["pg"].get("checkpoint_timeout") == 300.0
    assert facts["pg"].get("huge_pages") == "try"
    assert facts["pg_source"].get("maintenance_work_mem") == "default"
    with pytest.raises(Unknown):  # written by hand without a source: none is made up
        facts["pg_source"].get("shared_buffers")
    assert assumed["maintenance_work_mem"] == AssumedDefault(
        "maintenance_work_mem", "65536", "kB", 16
    )
    # No default for paths, what initdb or the host chose, or read-only settings.
    for name in ("data_directory", "TimeZone", "max_stack_depth", "block_size",
                 "shared_memory_size_in_huge_pages", "shared_buffers"):  # fmt: skip
        assert name not in assumed


def test_json_lists_the_assumed_defaults_and_the_rules_that_used_them() -> None:
    snapshot = big_host()
    result = audit(RULES, snapshot)
    data = json.loads(strict_json(as_data(result, snapshot)))
    assumed = {item["name"]: item for item in data["assumed_defaults"]}
    assert assumed["superuser_reserved_connections"] == {
        "name": "superuser_reserved_connections", "value": "3", "unit": None, "shown": "3",
        "pg_version": 16, "rules": ["connections-near-limit"],
    }  # fmt: skip
    assert assumed["maintenance_work_mem"]["shown"] == "64MB"
    assert "worst-case-memory" in assumed["autovacuum_work_mem"]["rules"]
    findings = {f["id"]: f for f in data["findings"]}
    assert findings["connections-near-limit"]["assumed_defaults"] == [
        "reserved_connections", "superuser_reserved_connections"
    ]  # fmt: skip
    # Only what an evaluated rule rested on, not the hundreds of settings filled in.
    used = {name for names in result.assumed_by.values() for name in names}
    assert set(assumed) == used and len(used) < 30


def test_a_recorded_snapshot_assumes_nothing() -> None:
    """A snapshot gathered from a server lists every setting the role could see: one missing
    there was hidden from the role, not left at its default."""
    snapshot = load_snapshot(DATA / "recorded-vm.json")
    del snapshot["server"]["settings"]["superuser_reserved_connections"]
    snapshot["server"]["connections"]["total"] = 95
    result = audit(RULES, snapshot)
    assert result.assumed == {}
    missing = {u.rule.id: u.missing for u in result.unchecked}
    assert missing["connections-near-limit"] == "pg.superuser_reserved_connections"


@pytest.mark.parametrize(
    ("server", "major"),
    [({"version_num": 170002}, 17), ({"version": "PostgreSQL 15.6 on x86_64"}, 15),
     ({"version": "18beta1"}, 18), ({"version_num": "180000"}, 18),
     ({"version_num": "lots"}, None), ({"version": "9.6"}, None),
     ({"version": True}, None)],
)  # fmt: skip
def test_server_major(server: dict[str, Any], major: int | None) -> None:
    assert server_major(server) == major
