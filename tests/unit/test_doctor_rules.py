"""The rule base on recorded and edited host snapshots: every problem found, no noise."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pgdyno.doctor.evaluate import Finding, audit
from pgdyno.doctor.rules import LAYERS, RuleError, load_rule_file, load_rules, rules_dir
from pgdyno.doctor.snapshot import load_snapshot
from pgdyno.terminal.doctor import as_data, render

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
    # worst-case-memory and huge-pages-missing are held back behind shared-buffers-large's fix
    # (test_findings_that_assume_another_fix_are_held_back).
    "container-4g-on-64g": ({"shared-buffers-large"}, {"memory-limit-below-host"}),
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
    "kernel-7-huge-pages-try": ({"huge-pages-preemptible-kernel"}, set()),
    # reserved, but huge_pages = try fell back: issue 31 (tests/e2e/test_tune_memory.py)
    "ram-8g-1108-huge-pages": ({"huge-pages-unused"}, set()),
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
    "read-ahead-off", "zone-reclaim-single-node", "worst-case-memory",
}  # fmt: skip


FLASH = {"rotational": False, "virtual": False, "nvme": False}
DISK = {"rotational": True, "virtual": False, "nvme": False}
NVME = {**FLASH, "nvme": True}
# blks_hit / (blks_hit + blks_read) = 99%, under 10 GiB of temporary files.
QUIET_CACHE = {"blks_hit": 9_900_000, "blks_read": 100_000, "temp_files": 12,
               "temp_bytes": 2_218_745_856, "deadlocks": 0}  # fmt: skip
MIGRATION = {
    "sched_migration_cost_ns": 50000,
    "sched_migration_cost_path": "/proc/sys/kernel/sched_migration_cost_ns",
}


# rule id, host / data device / setting / server edits of the quiet host, and what the finding
# must show (current, recommended), worked out by hand from the edit and the recorded host
# (23.5 GiB usable, vda, shared_buffers 128MB).
RARE_CASES = [
    ("swappiness-zero", {"swappiness": 0}, {}, {}, {}, ("0", "1")),
    ("swappiness-high", {"swappiness": 60}, {}, {}, {}, ("60", "1")),
    ("swap-in-use", {"swappiness": 60, "swap_used_bytes": 1024**3}, {}, {}, {},
     ("1 GiB swapped out, 23.0 GiB available", "vm.swappiness = 1")),
    ("sched-migration-cost-low", MIGRATION, {}, {}, {}, ("50000", "5000000")),
    ("random-page-cost-ssd", {}, FLASH, {"random_page_cost": "4"}, {},
     ("random_page_cost 4.0 on vda (SSD)", "1.1")),
    ("random-page-cost-hdd", {}, DISK, {"random_page_cost": "1.1"}, {},
     ("random_page_cost 1.1 on rotational vda", "4")),
    ("io-concurrency-flash", {}, NVME, {"effective_io_concurrency": "1"}, {}, ("1", "200")),
    ("scheduler-flash", {}, {**FLASH, "scheduler": "bfq"}, {}, {},
     ("bfq on vda", "none (NVMe) or mq-deadline")),
    ("write-barriers-off", {}, {"mount_options": "rw,noatime,nobarrier"}, {}, {},
     ("rw,noatime,nobarrier", "mount without nobarrier / barrier=0")),
    ("strictatime", {}, {"mount_options": "rw,strictatime"}, {}, {},
     ("rw,strictatime", "noatime")),
    ("read-ahead-off", {}, {"read_ahead_kb": 0}, {}, {}, ("0 KiB on vda", "4096 KiB")),
    ("zone-reclaim-single-node", {"zone_reclaim_mode": 1}, {}, {}, {}, ("1", "0")),
    ("kernel-before-3-13", {"kernel_release": "3.11.0-26-generic"}, {}, {}, {},
     ("3.11.0-26-generic", "3.13 or later")),
    ("autovacuum-off", {}, {}, {"autovacuum": "off"}, {}, ("off", "on")),
    ("wal-buffers-small", {}, {}, {"wal_buffers": "64"}, {},
     ("512kB", "-1 (automatic: 16MB at this shared_buffers)")),
    ("shared-buffers-large", {}, {}, {"shared_buffers": str(16 * 1024**3 // 8192)}, {},
     ("16GB of 23.5 GiB", "6016MB")),
    ("connections-near-limit", {}, {}, {}, {"connections": {"total": 95, "active": 3}},
     ("95 of 97 usable connections",
      "a connection pooler (PgBouncer), or a higher max_connections")),
    # PostgreSQL 16+: slots kept for pg_use_reserved_connections are not usable either (75 of
    # 97 would not fire).
    ("connections-near-limit", {}, {}, {"reserved_connections": "10"},
     {"connections": {"total": 75, "active": 3}},
     ("75 of 87 usable connections",
      "a connection pooler (PgBouncer), or a higher max_connections")),
    ("worst-case-memory", {}, {}, {"work_mem": str(1024 * 1024)}, {},
     ("205.4 GiB worst case against 23.5 GiB",
      "work_mem = 62MB, or fewer connections through a pooler")),
    ("cache-hit-low", {}, {}, {}, {"cache": {**QUIET_CACHE, "blks_hit": 5_000_000,
                                             "blks_read": 2_000_000}},
     ("71.4% of block reads found in shared buffers",
      "more shared_buffers, if the working set fits in RAM")),
    ("temp-files-large", {}, {}, {}, {"cache": {**QUIET_CACHE, "temp_files": 900,
                                                "temp_bytes": 50 << 30}},
     ("50 GiB in 900 temporary files",
      "a larger work_mem for the queries that spill (log_temp_files finds them)")),
    ("virtual-disk-costs", {}, {**DISK, "virtual": True}, {"random_page_cost": "4"}, {},
     ("random_page_cost 4.0 on virtual disk vda",
      "1.1 if the storage behind it is flash (most cloud volumes)")),
    ("effective-cache-size-low", {}, {}, {"effective_cache_size": "524288"}, {},
     ("4GB of 23.5 GiB", "18048MB")),
    ("overcommit-heuristic", {"overcommit_memory": 0}, {}, {}, {},
     ("vm.overcommit_memory = 0", "vm.overcommit_memory = 2 with a matching vm.overcommit_ratio")),
    ("sched-autogroup-on", {"sched_autogroup_enabled": 1}, {}, {}, {}, ("1", "0")),
    ("huge-pages-unused", {"nr_hugepages": 9000, "hugepages_free": 9000}, {}, {}, {},
     ("17.6 GiB reserved, 9000 of 9000 pages free", "huge_pages = on, or vm.nr_hugepages = 0")),
    ("memory-limit-below-host", {"memory_limit_bytes": 8 * 1024**3}, {}, {}, {},
     ("8 GiB limit on a host of 23.5 GiB",
      "size shared_buffers, work_mem and effective_cache_size from 8 GiB")),
]  # fmt: skip
# Rules that a rare case's edit sets off on their own account, beside the rule it stages.
ALSO_FIRES = {
    "swap-in-use": {"swappiness-high"},  # the edit's swappiness of 60
}


def test_findings_that_assume_another_fix_are_held_back() -> None:
    """A 4 GB container with 16 GB of shared buffers: the doctor asks to cut shared_buffers,
    and neither work_mem = 64kB for the worst case nor huge pages for the 16 GB it cuts."""
    result = audit(RULES, load_snapshot(DATA / "container-4g-on-64g.json"))
    found = {f.rule.id: f for f in result.findings}
    assert found["shared-buffers-large"].recommended == "1GB"
    assert not {"worst-case-memory", "huge-pages-missing", "cache-hit-low"} & set(found)
    held = {h.finding.rule.id: h.waits_for for h in result.held}
    assert held == {
        "worst-case-memory": ("shared-buffers-large",),
        "huge-pages-missing": ("shared-buffers-large",),
        "cache-hit-low": ("shared-buffers-large",),
    }
    data = as_data(result, load_snapshot(DATA / "container-4g-on-64g.json"))
    assert {h["id"]: h["waits_for"] for h in data["held"]} == {k: list(v) for k, v in held.items()}
    shown = "\n".join(str(line) for line in render(result, {}))
    assert "held back: worst-case-memory" in shown and "3 held back" in shown
    # Once the first fix is made, the held findings are judged again on the new value.
    snapshot = load_snapshot(DATA / "container-4g-on-64g.json")
    snapshot["server"]["settings"]["shared_buffers"]["setting"] = str(1024**3 // 8192)
    after = audit(RULES, snapshot)
    assert after.held == [] and "shared-buffers-large" not in {f.rule.id for f in after.findings}
    assert "huge-pages-missing" not in {f.rule.id for f in after.findings}


def test_a_rule_after_no_rule_is_refused(tmp_path: Path) -> None:
    for file in rules_dir().glob("*.toml"):
        shutil.copy(file, tmp_path / file.name)
    memory = tmp_path / "memory.toml"
    memory.write_text(memory.read_text().replace('after = ["shared-buffers-large"]',
                                                 'after = ["no-such-rule"]', 1))  # fmt: skip
    with pytest.raises(RuleError, match="after names no rule 'no-such-rule'"):
        load_rules(tmp_path)


def quiet_host() -> dict:
    """The healthy variant with a cache hit ratio of 99%: no rule fires on it."""
    snapshot = json.loads((DATA / "healthy.json").read_text())
    snapshot["server"]["cache"] = dict(QUIET_CACHE)
    return snapshot


def test_the_quiet_host_sets_off_nothing() -> None:
    assert audit(RULES, quiet_host()).findings == []


@pytest.mark.parametrize(
    ("rule_id", "host", "devices_data", "settings", "server", "shows"), RARE_CASES
)
def test_rare_rules_fire(rule_id, host, devices_data, settings, server, shows) -> None:
    snapshot = quiet_host()
    snapshot["host"].update(host)
    snapshot["devices"]["data"].update(devices_data)
    snapshot["server"].update(server)
    for name, value in settings.items():
        snapshot["server"]["settings"][name].update(setting=value, source="configuration file")
    found = {f.rule.id: f for f in audit(RULES, snapshot).findings}
    assert set(found) == {rule_id} | ALSO_FIRES.get(rule_id, set())  # nothing else fired
    assert (found[rule_id].current, found[rule_id].recommended) == shows


def test_wal_on_a_flash_data_device_is_information_only() -> None:
    snapshot = json.loads((DATA / "healthy.json").read_text())
    snapshot["devices"]["wal"] = dict(snapshot["devices"]["data"])
    snapshot["devices"]["wal_on_data_device"] = True
    result = audit(RULES, snapshot)
    assert "wal-on-data-device" in {f.rule.id for f in result.findings}
    assert not result.at_least("warning")


# huge-pages-preemptible-kernel: the kernel-7 variant sets it off; undoing any one of its
# conditions silences it, and a 6.x kernel whose model is unknown leaves it not checked.


def outcome(snapshot: dict, rule_id: str) -> str:
    result = audit(RULES, snapshot)
    if rule_id in {f.rule.id for f in result.findings}:
        return "fired"
    if rule_id in {r.id for r in result.passed}:
        return "passed"
    return next(f"not checked: {u.missing}" for u in result.unchecked if u.rule.id == rule_id)


def test_huge_pages_on_a_preemptible_kernel_names_the_kernel_and_the_pages() -> None:
    result = audit(RULES, load_snapshot(DATA / "kernel-7-huge-pages-try.json"))
    found = {f.rule.id: f for f in result.findings}["huge-pages-preemptible-kernel"]
    assert found.current == "huge_pages = try with shared_buffers 16 GiB, lazy preemption"
    assert found.recommended == "huge_pages = on, vm.nr_hugepages = 8400"
    assert found.fix.startswith("sysctl -w vm.nr_hugepages=8400\n")
    assert "huge_pages = 'on'" in found.fix


SIX = "6.8.0-45-generic"


@pytest.mark.parametrize(
    ("host", "settings", "expected"),
    [
        ({"preempt_model": None}, {}, "fired"),  # Linux 7.0 alone: PREEMPT_NONE is gone
        ({"kernel_release": SIX, "preempt_model": "full"}, {}, "fired"),
        ({"kernel_release": SIX, "preempt_model": "rt"}, {}, "fired"),
        ({"kernel_release": SIX, "preempt_model": "voluntary"}, {}, "passed"),
        ({"kernel_release": SIX, "preempt_model": "none"}, {}, "passed"),
        ({"kernel_release": SIX, "preempt_model": None}, {}, "not checked: host.preempt_model"),
        ({}, {"huge_pages": {"setting": "on", "vartype": "enum"}}, "passed"),
        ({}, {"huge_pages": {"setting": "true"}}, "passed"),  # by hand, as PostgreSQL reads it
        ({}, {"huge_pages": {"setting": "off", "vartype": "enum"}}, "fired"),
        ({}, {"shared_buffers": {"setting": "4GB"}}, "passed"),  # below the 8 GiB threshold
    ],
)  # fmt: skip
def test_huge_pages_on_a_preemptible_kernel(host, settings, expected) -> None:
    snapshot = json.loads((DATA / "kernel-7-huge-pages-try.json").read_text())
    snapshot["host"].update(host)
    snapshot["server"]["settings"].update(settings)
    assert outcome(snapshot, "huge-pages-preemptible-kernel") == expected


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


SEED_AUTHORS = {"000": "Konoplev", "001": "Greg Smith", "002": "Vondra", "003": "Kosmodemiansky",
                "004": "IBM"}  # fmt: skip
REPO = Path(__file__).parents[2]


def evidence_problem(item: str) -> str | None:
    """What is wrong with one evidence item; None when it cites a source a reviewer can find:
    a seed by number and its author, a chapter of the PostgreSQL or Linux kernel documentation,
    a dated public report (where, who, when: "Linux kernel mailing list, <author>, 2026-04-03"
    or a site such as "thebuild.com, <author>, <date>"), or an example plan of this
    repository with the figure it measured."""
    if seed := re.match(r"seed (\d{3}) \(([^,)]+)[,)]", item):
        number, author = seed.groups()
        return None if SEED_AUTHORS.get(number) == author else f"seed {number} is not {author}"
    if re.match(r"(PostgreSQL|Linux kernel) documentation, \S", item):
        return None
    if re.match(r"(Linux kernel mailing list|[a-z0-9-]+(\.[a-z0-9-]+)+), [A-Z][^,]+, "
                r"\d{4}-\d{2}-\d{2}, \S", item):  # fmt: skip
        return None
    if example := re.match(r"pgdyno's (examples/\S+\.toml) .*\(docs/benchmarks\.md\)$", item):
        return None if (REPO / example.group(1)).is_file() else f"no {example.group(1)}"
    return "cites no seed, documentation or example"


def test_each_rule_file_holds_its_own_layer() -> None:
    for layer in LAYERS:
        rules = load_rule_file(rules_dir() / f"{layer}.toml")
        assert {rule.spec.layer for rule in rules} == {layer}
    assert sorted(p.stem for p in rules_dir().glob("*.toml")) == sorted(LAYERS)


def test_every_evidence_item_names_its_source() -> None:
    problems = {
        (rule.id, item[:40]): why
        for rule in RULES
        for item in rule.spec.evidence
        if (why := evidence_problem(item))
    }
    assert problems == {}
    for rule in RULES:  # a measurement of ours alone is not enough: a seed or the docs too
        assert any(not e.startswith("pgdyno's") for e in rule.spec.evidence), rule.id


@pytest.mark.parametrize(
    "item",
    [
        "seed 005 (Konoplev): a seed that does not exist",
        "seed 001 (Vondra): the wrong author for seed 001",
        "PostgreSQL docs say so, somewhere in there",
        "pgdyno's examples/999-nothing.toml gave +5% (docs/benchmarks.md)",
        "a blog post I read once, about this setting",
        "thebuild.com, someone, recently: a report without its date",
    ],
)
def test_an_evidence_item_without_a_findable_source_is_caught(item: str) -> None:
    assert evidence_problem(item) is not None


# Every knob the seeds name, the rule that covers it, and the field of that rule that must name
# it: the fix that sets it, or the condition that reads it.
SEED_KNOBS = {
    "vm.zone_reclaim_mode": ("numa-zone-reclaim", "fix", "sysctl -w vm.zone_reclaim_mode=0"),
    "kernel.numa_balancing": ("numa-balancing", "fix", "sysctl -w kernel.numa_balancing=0"),
    "numactl --interleave": ("numa-interleave", "fix", "numactl --interleave=all"),
    "vm.nr_hugepages": ("huge-pages-missing", "fix", "sysctl -w vm.nr_hugepages={pages}"),
    "huge_pages": ("huge-pages-missing", "fix", "ALTER SYSTEM SET huge_pages = 'on'"),
    "transparent huge pages": (
        "thp-always", "fix", "echo never > /sys/kernel/mm/transparent_hugepage/enabled"),
    "vm.swappiness": ("swappiness-high", "fix", "sysctl -w vm.swappiness=1"),
    "vm.dirty_background_bytes": (
        "dirty-writeback-large", "fix", "vm.dirty_background_bytes=67108864"),
    "vm.dirty_bytes": ("dirty-writeback-large", "fix", " vm.dirty_bytes=536870912"),
    "kernel.sched_migration_cost_ns": (
        "sched-migration-cost-low", "when", "host.sched_migration_cost_ns < 500000"),
    "kernel.sched_autogroup_enabled": (
        "sched-autogroup-on", "fix", "sysctl -w kernel.sched_autogroup_enabled=0"),
    "CPU governor": ("cpu-governor-powersave", "fix", "echo performance > $g"),
    "read_ahead_kb": ("read-ahead-off", "fix", "echo 4096 > /sys/block/{disk}/queue/read_ahead_kb"),
    "shared_buffers": ("shared-buffers-small", "fix", "ALTER SYSTEM SET shared_buffers = "),
    "effective_cache_size": (
        "effective-cache-size-low", "fix", "ALTER SYSTEM SET effective_cache_size = "),
    "autovacuum": ("autovacuum-off", "fix", "ALTER SYSTEM SET autovacuum = on"),
    "checkpoint_completion_target": (
        "checkpoint-completion-target-low", "fix",
        "ALTER SYSTEM SET checkpoint_completion_target = 0.9"),
    "max_wal_size": ("checkpoints-requested", "fix", "ALTER SYSTEM SET max_wal_size = '{size}'"),
    "wal_buffers": ("wal-buffers-small", "fix", "ALTER SYSTEM SET wal_buffers = -1"),
    "synchronous_commit": (
        "synchronous-commit-off", "fix", "ALTER SYSTEM SET synchronous_commit = on"),
    "ext3": ("ext3-data", "when", "data.fstype == 'ext3'"),
    "pg_wal on its own disk": ("wal-on-spinning-data-disk", "fix", "mv {data_dir}/pg_wal "),
    "kernel 3.2": ("kernel-3-2", "when", "host.kernel_version >= (3, 2)"),
}  # fmt: skip


@pytest.mark.parametrize("knob", sorted(SEED_KNOBS))
def test_every_knob_the_seeds_name_has_a_rule(knob: str) -> None:
    rule_id, field, text = SEED_KNOBS[knob]
    (rule,) = [rule for rule in RULES if rule.id == rule_id]
    assert text in getattr(rule.spec, field)


def broken_copy(tmp_path: Path, name: str, old: str, new: str) -> tuple[Path, int]:
    """A rule file of the package with one piece of text replaced, and that text's line."""
    original = (rules_dir() / name).read_text()
    assert original.count(old) >= 1, old
    line = original[: original.index(old)].count("\n") + 1
    broken = tmp_path / name
    broken.write_text(original.replace(old, new, 1))
    return broken, line


GUIDE = "; see docs/doctor.md (the rule format)."
THP = "rule 'thp-always'"


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ('id = "thp-always"', 'id = "THP always"',
         "rule 'THP always', id: string should match pattern '^[a-z0-9]+(-[a-z0-9]+)*$'"),
        ('severity = "warning"', 'severity = "severe"',
         f"{THP}, severity: input should be 'info', 'warning' or 'critical'"),
        ('takes_effect = "now"', 'takes_effect = "later"',
         f"{THP}, takes_effect: input should be 'now', 'reload', 'restart' or 'reboot'"),
        ("when = \"host.thp_enabled == 'always'\"", "when = \"open('x')\"",
         f"{THP}, when: unknown function 'open'"),
        ("when = \"host.thp_enabled == 'always'\"", "when = \"host.thp_enabled == \"",
         f"{THP}, when: not an expression (invalid syntax)"),
        ("when = \"host.thp_enabled == 'always'\"", "when = \"hots.thp_enabled == 'always'\"",
         f"{THP}, when: unknown name 'hots'"),
        ('current = "host.thp_enabled"', 'current = "host.thp_enabeld"',
         f"{THP}, current: no fact host.thp_enabeld is known"),
        ('fix = "echo never', 'fix = "echo {nothing} never',
         f"{THP}, fix: {{nothing}} is neither current, recommended nor one of the rule's values"),
        ('fix = "echo never', 'fix = "echo { never',
         f"{THP}, fix: not a text template (expected '}}' before end of string; write {{{{ for "
         "a brace)"),
        ("caveats = ", "caveat = ", f"{THP}, caveat: extra inputs are not permitted"),
        ('evidence = [\n  "seed 003', 'evidence = [\n  "seed 3",\n  "seed 003',
         f"{THP}, evidence: evidence 'seed 3' does not say where it comes from"),
    ],
)  # fmt: skip
def test_a_malformed_rule_is_one_sentence_with_file_and_line(
    tmp_path: Path, old: str, new: str, problem: str
) -> None:
    broken, line = broken_copy(tmp_path, "memory.toml", old, new)
    with pytest.raises(RuleError) as caught:
        load_rule_file(broken)
    assert str(caught.value) == f"{broken} line {line}: {problem}{GUIDE}"


def test_a_missing_key_is_reported_at_its_entry(tmp_path: Path) -> None:
    broken, _ = broken_copy(tmp_path, "memory.toml", 'takes_effect = "now"\n', "")
    with pytest.raises(RuleError) as caught:
        load_rule_file(broken)  # the first [[rule]] header is line 5
    assert str(caught.value) == f"{broken} line 5: {THP}, takes_effect: field required{GUIDE}"


def test_a_file_that_is_not_toml_says_where(tmp_path: Path) -> None:
    broken, _ = broken_copy(tmp_path, "memory.toml", 'severity = "warning"', "severity warning")
    with pytest.raises(RuleError) as caught:
        load_rule_file(broken)
    assert str(caught.value) == (
        f"{broken} is not valid TOML (Expected '=' after a key in a key/value pair (at line 8, "
        "column 10)); fix the syntax there."
    )


def test_duplicate_ids_are_refused_at_the_second(tmp_path: Path) -> None:
    shutil.copy(rules_dir() / "cpu.toml", tmp_path / "a.toml")
    shutil.copy(rules_dir() / "cpu.toml", tmp_path / "b.toml")
    first = load_rule_file(tmp_path / "a.toml")[0].id
    with pytest.raises(RuleError) as caught:
        load_rules(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'b.toml'} line 5: rule {first!r}, id: rule id {first!r} is used twice, "
        f"and rule ids must be unique{GUIDE}"
    )


# -- worst-case-memory counts each connection's own memory (issue 31) ----------------------------


def worst_case(snapshot: dict[str, object]) -> Finding | None:
    found = {f.rule.id: f for f in audit(RULES, snapshot).findings}
    return found.get("worst-case-memory")


def test_worst_case_memory_counts_each_connections_own_memory() -> None:
    """8 GiB, 2GB of shared buffers, work_mem 64kB: 1000 connections fit; 4000 fit only without
    their own ~2 MiB each (BACKEND_BYTES), and the rule names the figure that fits."""
    snapshot = load_snapshot(DATA / "ram-8g-1108-huge-pages.json")
    settings = snapshot["server"]["settings"]
    settings["work_mem"].update(setting="64")
    settings["max_connections"].update(setting="1000")
    assert worst_case(snapshot) is None
    settings["max_connections"].update(setting="4000")
    finding = worst_case(snapshot)  # 4000 x 64kB x 2 alone would be 500 MiB: under the RAM
    assert finding is not None
    # (3/4 x 8 GiB - 2 GiB - 3 x 64 MiB) / (2 MiB + 64kB x 2)
    assert "at most 1837 connections fit: use a pooler such as PgBouncer" in finding.recommended
