"""The rule base on recorded and edited host snapshots: every problem found, no noise."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pgdyno.doctor.evaluate import audit
from pgdyno.doctor.rules import LAYERS, RuleError, load_rule_file, load_rules, rules_dir
from pgdyno.doctor.snapshot import load_snapshot

DATA = Path(__file__).parent.parent / "data" / "doctor"
RULES = load_rules()

# Findings at warning or above that each edited host must produce, exactly: one more is noise.
# Info-level findings are checked by inclusion.
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "healthy": (set(), set()),
    "numa-two-nodes": ({"numa-zone-reclaim"}, {"numa-balancing", "numa-interleave"}),
    "thp-always": ({"thp-always", "thp-defrag-always"}, set()),
    "kernel-3.2": ({"kernel-3-2"}, set()),
    "ext3-data": ({"ext3-data"}, set()),
    "ram-256g-dirty-ratio-20": ({"dirty-writeback-large", "shared-buffers-small"}, set()),
    "container-4g-on-64g": (
        {"shared-buffers-large", "worst-case-memory", "huge-pages-missing"},
        {"memory-limit-below-host"},
    ),
    "wal-on-data-device": ({"wal-on-spinning-data-disk"}, set()),
    "risky-server": (
        {
            "fsync-off",
            "full-page-writes-off",
            "synchronous-commit-off",
            "checkpoint-completion-target-low",
            "checkpoints-requested",
            "pending-restart",
        },
        set(),
    ),
    "large-buffers-no-huge-pages": ({"huge-pages-missing"}, set()),
    "too-few-huge-pages": ({"huge-pages-short", "huge-pages-unused"}, set()),
    "governor-ondemand": ({"cpu-governor-powersave"}, set()),
}


def findings(name: str) -> tuple[set[str], set[str]]:
    result = audit(RULES, load_snapshot(DATA / f"{name}.json"))
    serious = {f.rule.id for f in result.at_least("warning")}
    return serious, {f.rule.id for f in result.findings} - serious


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_edited_host_gets_exactly_its_findings(name: str) -> None:
    serious, info = findings(name)
    expected_serious, expected_info = EXPECTED[name]
    assert serious == expected_serious
    assert expected_info <= info


def test_every_variant_file_is_tested() -> None:
    files = {p.stem for p in DATA.glob("*.json")} - {"recorded-vm"}
    assert files == set(EXPECTED)


def test_recorded_vm_findings_are_what_this_vm_has() -> None:
    """The real recording: a sandbox with PostgreSQL's defaults on a 24 GiB VM without swap."""
    snapshot = load_snapshot(DATA / "recorded-vm.json")
    result = audit(RULES, snapshot)
    ids = {f.rule.id for f in result.findings}
    assert {"shared-buffers-small", "dirty-writeback-large", "swap-none", "swappiness-high"} <= ids
    assert "fsync-off" not in ids and "ext3-data" not in ids
    # Every rule is evaluated or says which fact it lacked.
    assert len(result.findings) + len(result.passed) + len(result.unchecked) == len(RULES)
    for item in result.unchecked:
        assert item.missing.split(".")[0] in {"host", "data", "wal", "devices", "server", "pg"}


def test_fixes_are_filled_in() -> None:
    """No placeholder or Python repr left in any fix the variants produce."""
    for file in DATA.glob("*.json"):
        for finding in audit(RULES, load_snapshot(file)).findings:
            text = f"{finding.fix} {finding.persist or ''} {finding.current} {finding.recommended}"
            assert "{" not in text.replace("{{", "") or "ATTR{" in text, (file.name, text)
            assert "Unknown(" not in text and "None" not in text, (file.name, text)


def test_every_rule_fires_on_some_snapshot() -> None:
    fired = {f.rule.id for file in DATA.glob("*.json")
             for f in audit(RULES, load_snapshot(file)).findings}  # fmt: skip
    never = {rule.id for rule in RULES} - fired
    # Rules whose trigger no variant stages: each is checked in test_rare_rules_fire.
    assert never <= RARE
    # Each of them has its own case below (wal-on-data-device: a test of its own).
    assert {case[0] for case in RARE_CASES} | {"wal-on-data-device"} == RARE


RARE = {
    "swappiness-zero", "swap-in-use", "swappiness-high", "sched-migration-cost-low",
    "random-page-cost-ssd", "random-page-cost-hdd", "io-concurrency-flash", "scheduler-flash",
    "write-barriers-off", "strictatime", "kernel-before-3-13", "autovacuum-off",
    "wal-buffers-small", "shared-buffers-large", "connections-near-limit", "cache-hit-low",
    "temp-files-large", "virtual-disk-costs", "effective-cache-size-low", "overcommit-heuristic",
    "sched-autogroup-on", "wal-on-data-device", "huge-pages-unused", "memory-limit-below-host",
    "read-ahead-off", "zone-reclaim-single-node",
}  # fmt: skip


FLASH = {"rotational": False, "virtual": False, "nvme": False}
DISK = {"rotational": True, "virtual": False, "nvme": False}
NVME = {**FLASH, "nvme": True}
MIGRATION = {
    "sched_migration_cost_ns": 50000,
    "sched_migration_cost_path": "/proc/sys/kernel/sched_migration_cost_ns",
}


RARE_CASES = [
    ("swappiness-zero", {"swappiness": 0}, {}, {}, {}),
    ("swappiness-high", {"swappiness": 60}, {}, {}, {}),
    ("swap-in-use", {"swappiness": 60, "swap_used_bytes": 1024**3}, {}, {}, {}),
    ("sched-migration-cost-low", MIGRATION, {}, {}, {}),
    ("random-page-cost-ssd", {}, FLASH, {"random_page_cost": "4"}, {}),
    ("random-page-cost-hdd", {}, DISK, {"random_page_cost": "1.1"}, {}),
    ("io-concurrency-flash", {}, NVME, {"effective_io_concurrency": "1"}, {}),
    ("scheduler-flash", {}, {**FLASH, "scheduler": "bfq"}, {}, {}),
    ("write-barriers-off", {}, {"mount_options": "rw,noatime,nobarrier"}, {}, {}),
    ("strictatime", {}, {"mount_options": "rw,strictatime"}, {}, {}),
    ("read-ahead-off", {}, {"read_ahead_kb": 0}, {}, {}),
    ("zone-reclaim-single-node", {"zone_reclaim_mode": 1}, {}, {}, {}),
    ("kernel-before-3-13", {"kernel_release": "3.11.0-26-generic"}, {}, {}, {}),
    ("autovacuum-off", {}, {}, {"autovacuum": "off"}, {}),
    ("wal-buffers-small", {}, {}, {"wal_buffers": "64"}, {}),
    ("shared-buffers-large", {}, {}, {"shared_buffers": str(16 * 1024**3 // 8192)}, {}),
    ("connections-near-limit", {}, {}, {}, {"connections": {"total": 95, "active": 3}}),
    ("cache-hit-low", {}, {}, {}, {"cache": {"blks_hit": 5_000_000, "blks_read": 2_000_000,
                                             "temp_files": 0, "temp_bytes": 0}}),
    ("temp-files-large", {}, {}, {}, {"cache": {"blks_hit": 1, "blks_read": 0,
                                                "temp_files": 900, "temp_bytes": 50 << 30}}),
    ("virtual-disk-costs", {}, {**DISK, "virtual": True}, {"random_page_cost": "4"}, {}),
    ("effective-cache-size-low", {}, {}, {"effective_cache_size": "524288"}, {}),
    ("overcommit-heuristic", {"overcommit_memory": 0}, {}, {}, {}),
    ("sched-autogroup-on", {"sched_autogroup_enabled": 1}, {}, {}, {}),
    ("huge-pages-unused", {"nr_hugepages": 9000, "hugepages_free": 9000}, {}, {}, {}),
    ("memory-limit-below-host", {"memory_limit_bytes": 8 * 1024**3}, {}, {}, {}),
]  # fmt: skip


@pytest.mark.parametrize(("rule_id", "host", "devices_data", "settings", "server"), RARE_CASES)
def test_rare_rules_fire(rule_id, host, devices_data, settings, server) -> None:
    snapshot = json.loads((DATA / "healthy.json").read_text())
    snapshot["host"].update(host)
    snapshot["devices"]["data"].update(devices_data)
    snapshot["server"].update(server)
    for name, value in settings.items():
        snapshot["server"]["settings"][name].update(setting=value, source="configuration file")
    ids = {f.rule.id for f in audit(RULES, snapshot).findings}
    assert rule_id in ids


def test_wal_on_a_flash_data_device_is_information_only() -> None:
    snapshot = json.loads((DATA / "healthy.json").read_text())
    snapshot["devices"]["wal"] = dict(snapshot["devices"]["data"])
    snapshot["devices"]["wal_on_data_device"] = True
    result = audit(RULES, snapshot)
    assert "wal-on-data-device" in {f.rule.id for f in result.findings}
    assert not result.at_least("warning")


def test_a_missing_fact_makes_a_rule_not_checked_not_passed() -> None:
    snapshot = json.loads((DATA / "healthy.json").read_text())
    del snapshot["host"]["thp_enabled"]
    snapshot["unread"]["host.thp_enabled"] = "not present on this kernel"
    result = audit(RULES, snapshot)
    unchecked = {u.rule.id: u.missing for u in result.unchecked}
    assert unchecked["thp-always"] == "host.thp_enabled"
    assert "thp-always" not in {r.id for r in result.passed}


def test_no_server_leaves_the_postgresql_layer_unchecked() -> None:
    snapshot = json.loads((DATA / "healthy.json").read_text())
    snapshot["server"] = None
    result = audit(RULES, snapshot)
    assert not [f for f in result.findings if f.rule.spec.layer == "postgresql"]
    assert {u.rule.spec.layer for u in result.unchecked} >= {"postgresql"}
    assert "thp-always" in {r.id for r in result.passed}  # host rules still run


def test_rules_cover_every_layer_and_cite_evidence() -> None:
    assert {rule.spec.layer for rule in RULES} == set(LAYERS)
    for rule in RULES:
        assert any(re.search(r"seed 00[0-4]|documentation", e) for e in rule.spec.evidence)


SEED_KNOBS = (
    "zone_reclaim_mode", "numa_balancing", "interleave", "nr_hugepages", "huge_pages",
    "transparent", "swappiness", "dirty_background_bytes", "dirty_bytes",
    "sched_migration_cost_ns", "sched_autogroup_enabled", "governor", "read_ahead",
    "shared_buffers", "effective_cache_size", "autovacuum", "checkpoint_completion_target",
    "max_wal_size", "wal_buffers", "synchronous_commit", "ext3", "pg_wal", "3.2",
)  # fmt: skip


def test_every_knob_the_seeds_name_has_a_rule() -> None:
    text = " ".join(
        f"{r.spec.when} {r.spec.fix} {r.spec.title} {r.spec.recommended} {r.spec.rationale}"
        for r in RULES
    ).lower()
    missing = [knob for knob in SEED_KNOBS if knob.lower() not in text]
    assert not missing


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('id = "thp-always"', 'id = "THP always"'), "should match pattern"),
        (('severity = "warning"', 'severity = "severe"'), "severity"),
        (('takes_effect = "now"', 'takes_effect = "later"'), "takes_effect"),
        (("when = \"host.thp_enabled == 'always'\"", "when = \"open('x')\""), "unknown function"),
        (('fix = "echo never', 'fix = "echo {nothing} never'), "{nothing} is neither"),
        (("caveats = ", "caveat = "), "caveat"),
    ],
)
def test_a_malformed_rule_file_names_file_line_and_key(tmp_path: Path, edit, message) -> None:
    original = (rules_dir() / "memory.toml").read_text()
    assert edit[0] in original
    broken = tmp_path / "memory.toml"
    broken.write_text(original.replace(edit[0], edit[1], 1))
    with pytest.raises(RuleError) as caught:
        load_rule_file(broken)
    assert message in str(caught.value)
    assert str(broken) in str(caught.value) and " line " in str(caught.value)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    shutil.copy(rules_dir() / "cpu.toml", tmp_path / "a.toml")
    shutil.copy(rules_dir() / "cpu.toml", tmp_path / "b.toml")
    with pytest.raises(RuleError, match="used twice"):
        load_rules(tmp_path)
