"""Every rule fires and stays silent on recorded input, with the cases as data
(tests/data/rule_cases/): each doctor rule (doctor/rules/*.toml), each entry of data/tune.toml
and each event entry of doctor/wait_rules.toml. A rule or entry without its case fails here, so
a new one comes with the input that shows it working both ways."""

from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pgdyno.doctor.evaluate import audit
from pgdyno.doctor.rules import load_rules
from pgdyno.doctor.waits import MIN_SHARE, cite, wait_rules
from pgdyno.records.tune import FACT_FIELDS
from pgdyno.records.waits import WaitProfile, WaitShare
from pgdyno.tune.facts import Given
from pgdyno.tune.knowledge import Entry, load_knowledge
from pgdyno.tune.model import GROUPS
from pgdyno.tune.recommend import recommend
from pgdyno.tune.session import Gathered, from_snapshot

DATA = Path(__file__).parent.parent / "data"
CASES = DATA / "rule_cases"
DOCTOR = DATA / "doctor"
RULES = load_rules()
ENTRIES = load_knowledge()


def cases(name: str, key: str) -> dict[str, dict[str, Any]]:
    found = tomllib.loads((CASES / name).read_text())["case"]
    by_key = {case[key]: case for case in found}
    assert len(by_key) == len(found), f"{name}: a {key} twice"
    return by_key


DOCTOR_CASES = cases("doctor.toml", "rule")
TUNE_CASES = cases("tune.toml", "key")
WAIT_CASES = cases("waits.toml", "event")


def test_every_case_names_a_rule_that_exists() -> None:
    assert DOCTOR_CASES.keys() <= {rule.id for rule in RULES}
    assert TUNE_CASES.keys() <= {entry.spec.key for entry in ENTRIES}
    assert all(any(event in e.names for e in wait_rules()) for event in WAIT_CASES)


# -- the doctor's rules ---------------------------------------------------------------------------


def quiet_host() -> dict[str, Any]:
    """healthy.json with a 99% cache hit ratio: no rule fires on it (test_doctor_rules.py)."""
    snapshot = json.loads((DOCTOR / "healthy.json").read_text())
    snapshot["server"]["cache"] = {
        "blks_hit": 9_900_000, "blks_read": 100_000, "temp_files": 12,
        "temp_bytes": 2_218_745_856, "deadlocks": 0,
    }  # fmt: skip
    return snapshot


def edited(edit: dict[str, Any]) -> dict[str, Any]:
    """The quiet host (or a recorded variant) with a case's edit (doctor.toml's header)."""
    if "variant" in edit:
        snapshot = json.loads((DOCTOR / f"{edit['variant']}.json").read_text())
    else:
        snapshot = quiet_host()
    snapshot = copy.deepcopy(snapshot)
    snapshot["host"].update(edit.get("host", {}))
    snapshot["server"].update(edit.get("server", {}))
    snapshot["devices"]["data"].update(edit.get("devices_data", {}))
    if edit.get("wal_from_data"):
        snapshot["devices"]["wal"] = dict(snapshot["devices"]["data"])
    snapshot["devices"].update(edit.get("devices", {}))
    for name, value in edit.get("settings", {}).items():
        snapshot["server"]["settings"][name].update(setting=value, source="configuration file")
    return snapshot


def outcome(snapshot: dict[str, Any], rule_id: str) -> str:
    result = audit(RULES, snapshot)
    if rule_id in {f.rule.id for f in result.findings}:
        return "fired"
    if rule_id in {r.id for r in result.passed}:
        return "passed"
    return next(f"not checked: {u.missing or u.problem}" for u in result.unchecked
                if u.rule.id == rule_id)  # fmt: skip


@pytest.mark.parametrize("rule_id", [rule.id for rule in RULES])
def test_every_doctor_rule_fires_and_stays_silent(rule_id: str) -> None:
    case = DOCTOR_CASES.get(rule_id)
    assert case is not None, f"no case for {rule_id} in tests/data/rule_cases/doctor.toml"
    assert outcome(edited(case["fires"]), rule_id) == "fired"
    assert outcome(edited(case.get("silent", {})), rule_id) == "passed"


# -- tune's entries -------------------------------------------------------------------------------


def recorded() -> Gathered:
    snapshot = json.loads((DOCTOR / "recorded-vm.json").read_text())
    return from_snapshot(snapshot, Given(profile="oltp"))


# Facts that list what the build offers -> the setting whose enum values they are.
OFFERED = {"io_methods": "io_method", "wal_compressions": "wal_compression",
           "toast_compressions": "default_toast_compression"}  # fmt: skip


def facts_value(value: Any) -> Any:
    if value == "unknown":
        return None
    return tuple(value) if isinstance(value, list) else value


def given_settings(entry: Entry, edit: dict[str, Any]) -> dict[str, str]:
    """The settings of this entry (by key: name@disk for a device) for the edited facts."""
    gathered = recorded()
    facts = gathered.facts
    changes = {k: facts_value(v) for k, v in edit.items() if k in FACT_FIELDS}
    assert set(edit) - set(changes) <= {"device", "groups"}, edit
    if "device" in edit:
        disk = {k: facts_value(v) for k, v in edit["device"].items()}
        changes["devices"] = tuple(replace(d, **disk) for d in facts.devices)
    facts = replace(facts, **changes)
    meta = dict(gathered.meta)
    for fact, setting in OFFERED.items():  # what the build offers: its pg_settings say so too
        if fact in changes:
            meta[setting] = replace(meta[setting], enumvals=changes[fact])
    groups = tuple(edit.get("groups", GROUPS))
    config = recommend(facts, meta, {}, groups=groups)
    return {s.key: s.value for s in config.settings if s.name == entry.name}


@pytest.mark.parametrize("key", [entry.spec.key for entry in ENTRIES])
def test_every_tune_entry_fires_and_stays_silent(key: str) -> None:
    case = TUNE_CASES.get(key)
    assert case is not None, f"no case for {key} in tests/data/rule_cases/tune.toml"
    entry = next(e for e in ENTRIES if e.spec.key == key)
    fired = given_settings(entry, case["fires"])
    assert fired, f"{key} gives no setting with {case['fires']}"
    if "value" in case:
        assert set(fired.values()) == {case["value"]}
    silent = case["silent"]
    if isinstance(silent, str):
        assert silent.startswith("always: ") and entry.spec.when is None, silent
    else:
        assert given_settings(entry, silent) == {}, silent


# -- the wait events' entries ---------------------------------------------------------------------


def profile(event: str, share: float) -> WaitProfile:
    shares = (WaitShare(event, share, share * 10), WaitShare("CPU*", 1 - share, 1.0))
    return WaitProfile("pg_stat_activity", 10.0, 100, 10.0, (), shares)


@pytest.mark.parametrize("names", [entry.names for entry in wait_rules()], ids=lambda n: n[0])
def test_every_wait_entry_is_cited_and_not(names: tuple[str, ...]) -> None:
    event = next((name for name in names if name in WAIT_CASES), None)
    assert event is not None, f"no case for {names[0]} in tests/data/rule_cases/waits.toml"
    case = WAIT_CASES[event]
    assert case["fires"] >= MIN_SHARE > case["silent"]
    cited = {c.event: c for c in cite(profile(event, case["fires"]), set())}
    entry = next(e for e in wait_rules() if e.names == names)
    assert cited[event].why == entry.why and cited[event].passed == entry.rules
    assert event not in {c.event for c in cite(profile(event, case["silent"]), set())}
