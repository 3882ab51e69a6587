"""pgdyno's tuning knowledge (data/tune.toml) against the doctor, PostgreSQL's catalogs and RAM.

One knowledge base, not two: for several machines and every profile, the configuration
`recommend` computes is written into a doctor snapshot and audited with the doctor's own rules;
none of the rules its settings cite may fire. Every PostgreSQL value passes the recorded
pg_settings of its version (14 to 18), and the worst case of the memory settings stays within
3/4 of the memory. Pure: facts are given (`offline_facts` plus host facts), disks are recorded
ones (tests/data/sys), nothing is read from this host.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pgdyno.doctor.evaluate import Audit, audit
from pgdyno.doctor.rules import load_rules
from pgdyno.doctor.snapshot import FORMAT, load_snapshot
from pgdyno.expressions.expr import BACKEND_BYTES
from pgdyno.host.disks import device_fields, device_for_path
from pgdyno.postgres.settings import SettingMeta, check_setting, conf_value, setting_value
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.records.tune import PROFILES, STORAGES, Disk, Storage, TuneFacts
from pgdyno.tune.baselines import BaselineInputs, pgtune
from pgdyno.tune.facts import Given, offline_facts, storage_of
from pgdyno.tune.knowledge import KNOWLEDGE_FILE, KnowledgeError, load_knowledge
from pgdyno.tune.model import Configuration
from pgdyno.tune.recommend import (
    HOST_CURRENT,
    baseline_configuration,
    pg_text,
    recommend,
    shown,
)
from pgdyno.tune.session import from_snapshot

DATA = Path(__file__).parent.parent / "data"
KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4
VERSIONS = (14, 15, 16, 17, 18)


def recorded_disk(sys_name: str, proc_name: str, path: str) -> dict[str, Any]:
    """A `devices.data` entry as the doctor writes it, from a recorded /proc and /sys."""
    sys_root, proc_root = DATA / "sys" / sys_name, DATA / "proc" / proc_name
    device = device_for_path(Path(path), proc_root=proc_root, sys_root=sys_root)
    assert device is not None and device.disk is not None
    return device_fields(Path(path), device)


VDA = recorded_disk("firecracker-vda", "idle/t0", "/var/lib/pgdyno")  # this VM's virtio disk
NVME = recorded_disk("edited-nvme-sdb", "edited-nvme-sdb", "/etc/postgresql/18/main")
SDB = recorded_disk("edited-nvme-sdb", "edited-nvme-sdb", "/var/lib/postgresql/18/main")


@dataclass(frozen=True)
class Machine:
    name: str
    ram: int  # what PostgreSQL may use (the cgroup limit when there is one)
    cpus: int
    pg: int
    disk: dict[str, Any] = field(repr=False)
    host_ram: int | None = None  # the host's RAM when a cgroup limits the server to `ram`
    connections: int | None = None
    numa_nodes: int = 1
    storage: Storage | None = None  # --storage; else read from the disk


MACHINES = [
    Machine("vm-2cpu-23.5g", 25276502016, 2, 18, VDA),  # this VM (tests/data/doctor/recorded-vm)
    Machine("nvme-16cpu-64g", 64 * GiB, 16, 16, NVME),
    Machine("hdd-4cpu-4g", 4 * GiB, 4, 14, SDB),
    Machine("cgroup-8g-on-256g", 8 * GiB, 4, 17, VDA, host_ram=256 * GiB),
    Machine("big-96cpu-512g", 512 * GiB, 96, 18, NVME, connections=1000, numa_nodes=2),
]
# Every storage kind --storage names, each on a disk of its kind (a SAN volume is a virtual disk
# here), on a mid-size machine; and small hosts, where dirty-page limits must scale down.
STORAGE_DISKS = {"hdd": SDB, "ssd": VDA, "san": VDA, "nvme": NVME}
STORAGE_MACHINES = [
    Machine(f"{kind}-8cpu-32g", 32 * GiB, 8, 17, disk, storage=kind)
    for kind, disk in STORAGE_DISKS.items()
]
SMALL_MACHINES = [Machine(f"small-{mb}m", mb * MiB, 1, 15, VDA) for mb in (512, 1024, 2048)]
CASES = [(m, p) for m in (*MACHINES, *STORAGE_MACHINES, *SMALL_MACHINES) for p in PROFILES]
IDS = [f"{m.name}-{p}" for m, p in CASES]


def io_methods(meta: dict[str, SettingMeta]) -> tuple[str, ...]:
    entry = meta.get("io_method")
    return entry.enumvals if entry else ()


def machine_facts(machine: Machine, profile: str, pg: int | None = None) -> TuneFacts:
    """pgtune's form for the machine, plus what the doctor reads from a local host."""
    major = pg or machine.pg
    facts = offline_facts(
        Given(
            profile=profile,  # type: ignore[arg-type]
            ram_bytes=machine.ram,
            cpus=machine.cpus,
            connections=machine.connections,
            pg_version=major,
            storage=machine.storage or storage_of(machine.disk),
        )
    )
    disk = machine.disk
    return replace(
        facts, local=True, huge_page=2 * MiB, host_ram=machine.host_ram or machine.ram,
        numa_nodes=machine.numa_nodes, thp=True,
        autogroup=True, migration_cost=True, swap_bytes=2 * GiB, wal_free=500 * GiB,
        unknown={k: v for k, v in facts.unknown.items() if k != "wal_free"},
        devices=(Disk(disk["disk"], "data", disk["scheduler"], tuple(disk["schedulers"]),
                      disk["read_ahead_kb"]),),
        io_methods=io_methods(recorded_settings(major)),
    )  # fmt: skip


def configure(machine: Machine, profile: str, path: Path | None = None) -> Configuration:
    facts = machine_facts(machine, profile)
    entries = load_knowledge(path) if path else None
    return recommend(facts, recorded_settings(machine.pg), {}, entries=entries)


def chosen(config: Configuration) -> dict[str, str]:
    """Every setting's value by key; an `apply` value wins over a `measure` one of the same name
    (io_method worker over io_uring). `review` and `measure` values are in: they are advice too."""
    values: dict[str, str] = {}
    for setting in sorted(config.settings, key=lambda s: s.status != "apply"):
        values.setdefault(setting.key, setting.value)
    return values


def wal_buffers_shown(shared_buffers: int) -> str:
    """What pg_settings shows for wal_buffers = -1: 1/32 of shared_buffers, at most one WAL
    segment (16MB), at least 8 pages (xlog.c, XLOGChooseNumBuffers)."""
    return f"{max(64 * KiB, min(shared_buffers // 32, 16 * MiB)) // KiB}kB"


def snapshot_of(config: Configuration, machine: Machine) -> dict[str, Any]:
    """The host and server as they would be with the configuration in effect (docs/doctor-
    snapshot.md, written by hand). What tune does not set is the host's usual state, at its
    worst where a rule could catch it (THP defrag `always`, dirty ratios 20/10)."""
    values = chosen(config)
    pg = {k: v for k, v in values.items() if k in {s.name for s in config.layer("postgresql")}}
    if pg.get("wal_buffers") == "-1":
        pg["wal_buffers"] = wal_buffers_shown(int(conf_value(pg["shared_buffers"])))
    settings = {
        name: {"setting": text, "source": "configuration file"} for name, text in pg.items()
    }
    disk = machine.disk["disk"]
    device = {
        **{k: v for k, v in machine.disk.items() if k not in ("schedulers", "free_bytes")},
        "scheduler": values[f"scheduler@{disk}"],
        "read_ahead_kb": int(values[f"read_ahead_kb@{disk}"]),
    }
    return {
        "format": FORMAT,
        "target": f"tune's configuration for {machine.name}",
        "host": host_section(values, machine),
        "devices": {"data": device, "wal": device, "wal_on_data_device": True},
        "server": {
            "version_num": machine.pg * 10000 + 1,
            "local": True,
            "settings": settings,
            "connections": {"total": 0, "active": 0, "idle_in_transaction": 0},
            "checkpoints": {"timed": 100, "requested": 0},
        },
    }


def host_section(values: dict[str, str], machine: Machine) -> dict[str, Any]:
    def number(name: str, otherwise: int) -> int:
        return int(values.get(name, otherwise))

    nr_hugepages = number("vm.nr_hugepages", 0)
    return {
        "kernel_release": "7.0.1-generic",  # the hardest case: huge_pages must be on
        "preempt_model": "lazy",
        "arch": "x86_64",
        "cpu_count": machine.cpus,
        "memory_bytes": machine.ram,
        "memory_total_bytes": machine.host_ram or machine.ram,
        "memory_limit_bytes": machine.ram if machine.host_ram else None,
        "memory_available_bytes": machine.ram // 2,
        "numa_nodes": machine.numa_nodes,
        "thp_enabled": values.get("transparent_hugepage/enabled", "always"),
        "thp_defrag": "always",
        "hugepage_size_bytes": 2 * MiB,
        "nr_hugepages": nr_hugepages,
        "hugepages_free": 0,  # the running server maps them all
        "swap_total_bytes": 2 * GiB,
        "swap_used_bytes": 0,
        "swappiness": number("vm.swappiness", 60),
        "dirty_ratio": 20,
        "dirty_background_ratio": 10,
        "dirty_bytes": number("vm.dirty_bytes", 0),
        "dirty_background_bytes": number("vm.dirty_background_bytes", 0),
        "zone_reclaim_mode": number("vm.zone_reclaim_mode", 1),
        "numa_balancing": number("kernel.numa_balancing", 1),
        "overcommit_memory": number("vm.overcommit_memory", 0),
        "overcommit_ratio": number("vm.overcommit_ratio", 50),
        "sched_autogroup_enabled": number("kernel.sched_autogroup_enabled", 1),
        "sched_migration_cost_ns": number("kernel.sched_migration_cost_ns", 500000),
        "sched_migration_cost_path": "/proc/sys/kernel/sched_migration_cost_ns",
    }


def cited(config: Configuration) -> set[str]:
    return {rule for setting in config.settings for rule in setting.rules}


def by_design(limited: bool) -> set[str]:
    """Cited rules that fire on purpose, on what tune does not (and should not) control:
    memory-limit-below-host (info) states a fact of the host, a cgroup limit below its RAM.
    tune sizes everything from the limit, which is what the rule asks; it cannot lift it.
    Nothing else: every profile (desktop too) gets values the doctor accepts."""
    return {"memory-limit-below-host"} if limited else set()


# Cited rules that need what only the running server knows. huge-pages-short compares
# vm.nr_hugepages with shared_memory_size_in_huge_pages, which PostgreSQL computes at start;
# --apply sizes vm.nr_hugepages from it (tests/e2e/test_tune.py checks that on a live server).
SERVER_COMPUTED = {"huge-pages-short": "pg.shared_memory_size_in_huge_pages"}


def disagreements(machine: Machine, profile: str, config: Configuration) -> dict[str, str]:
    """Cited rules that fire or cannot be checked (unchecked would hide a disagreement)."""
    del profile  # every profile is held to the same rules
    return audited(snapshot_of(config, machine), config, limited=bool(machine.host_ram))


def audited(
    snapshot: dict[str, Any], config: Configuration, *, limited: bool, unchecked: bool = True
) -> dict[str, str]:
    """Cited rules that fire, are held back, or (`unchecked`) cannot be checked."""
    result: Audit = audit(load_rules(), snapshot)
    rules = cited(config) - by_design(limited)
    found = {f.rule.id: f.current for f in result.findings if f.rule.id in rules}
    found |= {
        f"{h.finding.rule.id} (held back)": h.finding.current
        for h in result.held
        if h.finding.rule.id in rules
    }
    found |= {
        u.rule.id: f"not checked: {u.missing or u.problem}"
        for u in result.unchecked
        if unchecked and u.rule.id in rules and SERVER_COMPUTED.get(u.rule.id) != u.missing
    }
    return found


# -- the knowledge file ---------------------------------------------------------------------


def test_knowledge_loads_and_cites_only_existing_rules() -> None:
    entries = load_knowledge()
    assert len(entries) >= 30
    rules = {rule.id for rule in load_rules()}
    for entry in entries:
        assert set(entry.spec.rules) <= rules, entry.spec.key
        assert entry.evidence, entry.spec.key


def edited_copy(tmp_path: Path, old: str, new: str) -> tuple[Path, int]:
    """data/tune.toml with one line changed, and that line's number."""
    text = KNOWLEDGE_FILE.read_text()
    assert text.count(old) == 1, old
    line = text[: text.index(old)].count("\n") + 1
    path = tmp_path / "tune.toml"
    path.write_text(text.replace(old, new))
    return path, line


# A knowledge file of two entries (headers on lines 1 and 9), edited one way at a time below.
SMALL = """\
[[setting]]
key = "max_parallel_workers"
layer = "postgresql"
value = "t.cpus"
format = "number"
why = "every CPU may work on one parallel query"
rules = ["connections-near-limit"]

[[setting]]
key = "max_worker_processes"
layer = "postgresql"
value = "max(8, max_parallel_workers)"
format = "number"
why = "the pool the parallel workers are taken from"
evidence = ["PostgreSQL documentation, Resource Consumption: max_worker_processes"]
"""
KNOWLEDGE_GUIDE = "; see docs/tune.md (the knowledge format)."
WORKERS = "setting 'max_parallel_workers'"
POOL = "setting 'max_worker_processes'"


def test_the_small_knowledge_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "tune.toml"
    path.write_text(SMALL)
    assert [entry.name for entry in load_knowledge(path)] == [
        "max_parallel_workers", "max_worker_processes"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "line", "problem"),
    [
        ('value = "t.cpus"', 'value = "t.cpus +"', 4,
         f"{WORKERS}, value: not an expression (invalid syntax)"),
        ('value = "t.cpus"', 'value = "t.cpu"', 4, f"{WORKERS}, value: no fact t.cpu is known"),
        ('value = "t.cpus"', "value = \"__import__('os')\"", 4,
         f"{WORKERS}, value: unknown function '__import__'"),
        ('value = "t.cpus"', 'value = "t.cpus.__class__"', 4,
         f"{WORKERS}, value: attribute '__class__' is not allowed"),
        ('value = "t.cpus"', 'value = "max_worker_processes"', 4,
         f"{WORKERS}, value: unknown name 'max_worker_processes'"),
        ('value = "t.cpus"', 'value = "t.cpus"\nwhen = "device.disk"', 5,
         f"{WORKERS}, when: no fact device.disk is known"),
        ('rules = ["connections-near-limit"]', 'rules = ["no-such-rule"]', 7,
         f"{WORKERS}, rules.0: no doctor rule 'no-such-rule' exists"),
        ('format = "number"', 'format = "count"', 5,
         f"{WORKERS}, format: input should be 'size', 'bytes', 'number' or 'text'"),
        ('why = "every CPU', 'whyy = 1\nwhy = "every CPU', 6,
         f"{WORKERS}, whyy: extra inputs are not permitted"),
        ('evidence = ["PostgreSQL documentation, Resource Consumption: max_worker_processes"]',
         "evidence = []", 9,
         f"{POOL}: neither rules nor evidence say why"),
    ],
)  # fmt: skip
def test_a_malformed_entry_is_one_sentence_with_file_and_line(
    tmp_path: Path, old: str, new: str, line: int, problem: str
) -> None:
    assert old in SMALL, old
    path = tmp_path / "tune.toml"
    text = SMALL.replace(old, new, 1)
    path.write_text(text)
    with pytest.raises(KnowledgeError) as caught:
        load_knowledge(path)
    assert str(caught.value) == f"{path} line {line}: {problem}{KNOWLEDGE_GUIDE}"


# -- one knowledge base: the doctor does not flag what tune recommends ----------------------------


@pytest.mark.parametrize(("machine", "profile"), CASES, ids=IDS)
def test_doctor_does_not_flag_what_tune_recommends(machine: Machine, profile: str) -> None:
    config = configure(machine, profile)
    # nothing refused by the version's catalog; a small machine caps the profile's connections
    # at what its memory holds (each with its own BACKEND_BYTES) and says so, naming a pooler
    assert all("PgBouncer" in note for note in config.notes), config.notes
    assert {"shared-buffers-small", "worst-case-memory", "thp-always"} <= cited(config)
    assert disagreements(machine, profile, config) == {}


def test_every_storage_kind_is_tested() -> None:
    assert set(STORAGE_DISKS) == set(STORAGES)


# The recorded and edited doctor snapshots (tests/data/doctor), each tuned as `tune --from` does.
SNAPSHOTS = sorted((DATA / "doctor").glob("*.json")) + sorted(
    (DATA / "doctor" / "handwritten").glob("*.json")
)
# What PostgreSQL computes at start from the other settings: unknown until the server runs with
# the tuned configuration (tune --apply reads them then).
COMPUTED_AT_START = ("shared_memory_size", "shared_memory_size_in_huge_pages", "wal_buffers")


def tuned_snapshot(snapshot: dict[str, Any], config: Configuration) -> dict[str, Any]:
    """The snapshot as it would be with the configuration in effect, the server restarted on it
    (statistics of checkpoints start again, the huge pages it asks for are mapped)."""
    tuned = json.loads(json.dumps(snapshot))
    values = chosen(config)
    rows = tuned["server"]["settings"]
    for name in COMPUTED_AT_START:
        rows.pop(name, None)
    for s in config.layer("postgresql"):
        text = values[s.key]
        if s.name == "wal_buffers" and text == "-1":
            text = wal_buffers_shown(int(conf_value(values["shared_buffers"])))
        rows[s.name] = {"setting": text, "source": "configuration file"}
    host = tuned["host"]
    for s in config.layer("host"):
        field = HOST_CURRENT[s.name]
        host[field] = values[s.key] if field.startswith("thp_") else int(values[s.key])
    if host.get("nr_hugepages"):
        host["hugepages_free"] = 0
    for device in (tuned.get("devices") or {}).values():
        if isinstance(device, dict):
            for name in ("scheduler", "read_ahead_kb"):
                key = f"{name}@{device.get('disk')}"
                if key in values:
                    device[name] = values[key] if name == "scheduler" else int(values[key])
    tuned["server"]["checkpoints"] = {"timed": 100, "requested": 0, "stats_reset": None}
    return tuned


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("path", SNAPSHOTS, ids=[p.stem for p in SNAPSHOTS])
def test_doctor_does_not_flag_what_tune_recommends_from_a_snapshot(
    path: Path, profile: str
) -> None:
    snapshot = json.loads(path.read_text())
    gathered = from_snapshot(snapshot, Given(profile))  # type: ignore[arg-type]
    config = recommend(gathered.facts, gathered.meta, gathered.current)
    host = snapshot["host"]
    limited = bool(host.get("memory_limit_bytes")) and host["memory_limit_bytes"] < host.get(
        "memory_total_bytes", 0
    )
    # A snapshot lacks facts tune does not write (a hand-written one, an older kernel): rules
    # that need them are not checked there, which is no disagreement.
    tuned = tuned_snapshot(snapshot, config)
    found = audited(tuned, config, limited=limited, unchecked=False)
    assert {rule: found[rule] for rule in set(found) - USAGE_RULES.get(path.stem, set())} == {}


# Rules on how the server is used, not on a value tune writes: with 950 of 1000 connections in
# use, connections-near-limit asks for a pooler (or a higher max_connections that the memory
# budget then has to hold); tune plans for the server's max_connections and cannot lower the use.
USAGE_RULES = {"big-host-changed-only": {"connections-near-limit"}}


def test_the_agreement_test_fails_when_tune_toml_changes(tmp_path: Path) -> None:
    """Half of RAM as shared buffers: the doctor's shared-buffers-large must catch it."""
    path, _ = edited_copy(
        tmp_path,
        "raw = \"t.ram // 8 if t.profile == 'desktop' else max(t.ram // 4,",
        "raw = \"t.ram // 8 if t.profile == 'desktop' else max(t.ram // 2,",
    )
    machine = MACHINES[1]
    found = disagreements(machine, "oltp", configure(machine, "oltp", path))
    assert "shared-buffers-large" in found
    assert "32GB" in found["shared-buffers-large"]


def test_the_agreement_test_sees_a_host_value_change(tmp_path: Path) -> None:
    path, _ = edited_copy(
        tmp_path,
        'value = "max(MiB, min(64 * MiB, t.host_ram // 4 // 10 // MiB * MiB))"',
        'value = "2 * GiB"',
    )
    machine = MACHINES[0]
    assert "dirty-writeback-large" in disagreements(machine, "web", configure(machine, "web", path))


def test_the_snapshot_is_one_the_doctor_reads_from_a_file(tmp_path: Path) -> None:
    machine = MACHINES[4]
    snapshot = snapshot_of(configure(machine, "oltp"), machine)
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps(snapshot))
    again = audit(load_rules(), load_snapshot(path))
    assert {f.rule.id for f in again.findings} == {
        f.rule.id for f in audit(load_rules(), snapshot).findings
    }
    assert snapshot["server"]["settings"]["huge_pages"]["setting"] == "on"
    # at least shared_buffers in pages before the server counts the rest (tune/huge_pages.py)
    assert snapshot["host"]["nr_hugepages"] >= 128 * GiB // (2 * MiB)


# -- the worst case of memory ---------------------------------------------------------------------


def size(values: dict[str, str], name: str) -> int:
    value = conf_value(values[name])
    assert isinstance(value, int), (name, values[name])
    return value


@pytest.mark.parametrize(("machine", "profile"), CASES, ids=IDS)
def test_worst_case_memory_stays_within_three_quarters(machine: Machine, profile: str) -> None:
    config = configure(machine, profile)
    values = config.pg_values()
    facts = machine_facts(machine, profile)
    work_mem = size(values, "work_mem")
    assert work_mem >= 64 * KiB
    parallel = int(values.get("max_parallel_workers", 8))
    sessions = int(values["max_connections"]) + parallel
    worst = (
        size(values, "shared_buffers")
        + sessions * (BACKEND_BYTES + work_mem * float(facts.hash_mem or 0))
        + int(values["autovacuum_max_workers"]) * size(values, "maintenance_work_mem")
    )
    assert worst <= machine.ram * 3 / 4, (worst / GiB, machine.ram / GiB)


def test_work_mem_never_goes_below_postgresql_minimum() -> None:
    """A tiny machine with many connections: the budget is negative, work_mem stays 64kB, and
    max_connections is capped at what fits at that floor, each connection with its own memory
    (BACKEND_BYTES), saying so and naming a pooler (tune/startable.py)."""
    facts = offline_facts(Given("oltp", ram_bytes=1 * GiB, cpus=2, connections=5000, pg_version=17))
    config = recommend(facts, recorded_settings(17), {})
    values = config.pg_values()
    assert values["work_mem"] == "64kB"
    # 3/4 of 1GB less 256MB shared_buffers and 3 x 64MB maintenance_work_mem, at 2 MiB of its
    # own plus 64kB x 2.0 (hash_mem_multiplier) per session, less the 8 parallel workers.
    assert values["max_connections"] == str((768 - 256 - 192) * 1024 // (2048 + 128) - 8) == "142"
    assert len(config.notes) == 1 and "max_connections capped from 5000" in config.notes[0]
    assert "PgBouncer" in config.notes[0] and "at most 142 server connections" in config.notes[0]
    sessions = (int(values["max_connections"]) + 8) * (
        BACKEND_BYTES + size(values, "work_mem") * 2.0
    )
    fixed = size(values, "shared_buffers") + 3 * size(values, "maintenance_work_mem")
    assert fixed + sessions <= GiB * 3 / 4


@pytest.mark.parametrize(
    ("ram", "connections", "fitting"),
    [(512 * MiB, 5000, 67), (2 * GiB, 1000, 293), (64 * GiB, 1000, 1000)],
)
def test_connections_are_capped_by_memory(ram: int, connections: int, fitting: int) -> None:
    """Issue 31: 512MB at 5000 connections gave 1272, 2GB at 1000 kept 1000."""
    given = Given("mixed", ram_bytes=ram, cpus=2, connections=connections, pg_version=18)
    values = recommend(offline_facts(given), recorded_settings(18), {}).pg_values()
    assert values["max_connections"] == str(fitting)


def test_connections_are_capped_without_cpus_too() -> None:
    """work_mem unknown (no --cpus): the cap still holds, with PostgreSQL's default workers."""
    given = Given("mixed", ram_bytes=512 * MiB, connections=5000, pg_version=18)
    config = recommend(offline_facts(given), recorded_settings(18), {})
    assert int(config.pg_values()["max_connections"]) < 100
    assert any("PgBouncer" in note for note in config.notes)


def test_effective_cache_size_above_the_maximum_is_capped() -> None:
    """Issue 31: 24TB of RAM dropped effective_cache_size, leaving PostgreSQL's 4GB."""
    given = Given("mixed", ram_bytes=24 * TiB, cpus=64, pg_version=18)
    config = recommend(offline_facts(given), recorded_settings(18), {})
    most = recorded_settings(18)["effective_cache_size"].max_val
    assert most is not None
    assert size(config.pg_values(), "effective_cache_size") == int(most) * 8 * KiB
    assert not [n for n in config.notes if "effective_cache_size" in n]


@pytest.mark.parametrize(
    ("free", "max_wal", "min_wal"),
    [(600 * MiB, "144MB", "64MB"), (3 * GiB, "768MB", "384MB"), (100 * MiB, "32MB", "32MB"),
     (500 * GiB, "8GB", "1GB")],
)  # fmt: skip
def test_max_wal_size_never_above_a_quarter_of_the_free_space(
    free: int, max_wal: str, min_wal: str
) -> None:
    """Issue 31: 600 MiB free kept a 1GB floor."""
    facts = offline_facts(Given("mixed", ram_bytes=16 * GiB, cpus=4, pg_version=18))
    facts = replace(facts, wal_free=free)
    values = recommend(facts, recorded_settings(18), {}).pg_values()
    assert (values["max_wal_size"], values["min_wal_size"]) == (max_wal, min_wal)


def test_max_wal_size_is_left_out_when_the_free_space_is_unknown() -> None:
    """Issue 31: offline, unknown space gave a 64GB cap."""
    facts = offline_facts(Given("mixed", ram_bytes=16 * GiB, cpus=4, pg_version=18))
    config = recommend(facts, recorded_settings(18), {})
    assert "max_wal_size" not in config.pg_values()
    assert config.unknown["postgresql:max_wal_size"].startswith("needs wal_free (offline")


# -- every value against the catalog of its version ----------------------------------------------


@pytest.mark.parametrize("major", VERSIONS)
def test_every_value_passes_its_version_catalog(major: int) -> None:
    meta = recorded_settings(major)
    assert meta, f"no recorded pg_settings of PostgreSQL {major}"
    for machine in MACHINES:
        for profile in PROFILES:
            facts = machine_facts(machine, profile, pg=major)
            config = recommend(facts, meta, {})
            assert not config.notes, (machine.name, profile, config.notes)
            for setting in config.layer("postgresql"):
                assert check_setting(meta, setting.name, setting.value, str(major))
                expected = "restart" if meta[setting.name].needs_restart else "reload"
                assert setting.takes_effect == expected, setting.name
            names = {s.name for s in config.layer("postgresql")}
            # io_method stays worker, 18's default, so it is not written; io_workers is, on
            # flash (hundreds of requests in flight), from 18 on.
            assert "io_method" not in names
            flash = int(config.pg_values()["effective_io_concurrency"]) >= 32
            assert ("io_workers" in names) == (major >= 18 and flash), machine.name


def with_io_uring(meta: dict[str, SettingMeta]) -> dict[str, SettingMeta]:
    """The catalog of a build with io_uring (the recorded wheel has none)."""
    offering = replace(meta["io_method"], enumvals=("sync", "worker", "io_uring"))
    return {**meta, "io_method": offering}


def test_io_uring_is_a_measure_step_only_where_the_build_offers_it() -> None:
    meta = recorded_settings(18)
    assert io_methods(meta) == ("sync", "worker")  # the recorded wheel has no io_uring
    machine = MACHINES[0]

    # Facts read from this catalog: no io_uring entry at all, and nothing refused.
    plain = recommend(machine_facts(machine, "oltp"), meta, {})
    assert [(s.value, s.status) for s in plain.settings if s.name == "io_method"] == []
    assert not plain.notes

    # A build that offers it: offered as a measurement, never applied unmeasured.
    offering = with_io_uring(meta)
    facts = replace(machine_facts(machine, "oltp"), io_methods=io_methods(offering))
    measured = recommend(facts, offering, {})
    assert [(s.value, s.status) for s in measured.settings if s.name == "io_method"] == [
        ("io_uring", "measure"),
    ]
    assert "io_method" not in measured.pg_values()

    # Facts that say io_uring but a target that refuses it: left out with a note.
    refused = recommend(facts, meta, {})
    assert [s.value for s in refused.settings if s.name == "io_method"] == []
    assert len(refused.notes) == 1 and "io_method = io_uring left out" in refused.notes[0]


def test_pgtune_io_uring_is_left_out_with_a_note_when_the_build_lacks_it() -> None:
    values = pgtune(BaselineInputs(18, "dw", 128 * GiB, cpus=32))
    assert values["io_method"] == "io_uring"
    facts = offline_facts(Given("dw", ram_bytes=128 * GiB, cpus=32, pg_version=18))
    config = baseline_configuration("pgtune", values, facts, recorded_settings(18), {})
    names = [s.name for s in config.settings]
    assert "io_method" not in names
    assert names == [name for name in values if name != "io_method"]  # the rest, in order
    assert config.notes == tuple(n for n in config.notes if "pgtune's io_method = io_uring" in n)
    assert len(config.notes) == 1 and "io_uring" in config.notes[0]
    kept = baseline_configuration("pgtune", values, facts, with_io_uring(recorded_settings(18)), {})
    assert "io_method" in {s.name for s in kept.settings} and not kept.notes


# -- offline facts --------------------------------------------------------------------------------


def test_offline_facts_name_what_was_not_given() -> None:
    facts = offline_facts(Given("web", ram_bytes=64 * GiB, pg_version=17))
    config = recommend(facts, recorded_settings(17), {})
    names = {s.name for s in config.settings}
    parallel = {"max_worker_processes", "max_parallel_workers", "max_parallel_workers_per_gather",
                "max_parallel_maintenance_workers", "autovacuum_max_workers"}  # fmt: skip
    assert not parallel & names
    for name in parallel:
        assert config.unknown[f"postgresql:{name}"] == "needs cpus (give --cpus)"
    assert config.unknown["cpus"] == "give --cpus"
    assert config.unknown["storage"] == "give --storage"
    assert "postgresql:random_page_cost" in config.unknown
    # work_mem counts the parallel workers: unknown in turn, and says which fact it lacked.
    assert "work_mem" not in names
    assert config.unknown["postgresql:work_mem"].startswith("needs cpus")
    # Nothing of this host: huge pages are a to-do there (x86-64's 2MB pages assumed), with
    # huge_pages = try until they are reserved; no device; THP advice is for any Linux (nearly
    # every kernel has it).
    assert not config.layer("device") and facts.local is False
    assert config.pg_values()["huge_pages"] == "try" and facts.huge_page == 2 * MiB
    todo = next(s for s in config.settings if s.name == "vm.nr_hugepages")
    assert todo.status == "todo" and "vm.nr_hugepages" not in {s.name for s in config.to_apply()}
    assert "shared_memory_size_in_huge_pages" in todo.why
    assert config.facts.connections == 200
    assert config.facts.sources["connections"] == "profile web"


def test_offline_facts_with_everything_given_leave_nothing_unknown_but_the_disk() -> None:
    given = Given("oltp", ram_bytes=64 * GiB, cpus=16, connections=500, pg_version=16,
                  storage="nvme", data_size="greater_ram")  # fmt: skip
    config = recommend(offline_facts(given), recorded_settings(16), {})
    # track_io_timing: the clock's cost is measured only on the server's host; WAL sizes rest
    # on the free space of the WAL file system, unknown offline
    assert set(config.unknown) == {
        "data_bytes", "wal_free", "postgresql:track_io_timing", "postgresql:max_wal_size",
        "postgresql:min_wal_size",
    }  # fmt: skip
    values = config.pg_values()
    assert values["max_connections"] == "500" and values["random_page_cost"] == "1.1"
    assert values["max_parallel_workers"] == "16"


# -- disks ----------------------------------------------------------------------------------------


def test_storage_of_recorded_disks() -> None:
    assert (NVME["disk"], NVME["nvme"], NVME["rotational"]) == ("nvme0n1", True, False)
    assert storage_of(NVME) == "nvme"
    assert (SDB["disk"], SDB["rotational"], SDB["virtual"]) == ("sdb", True, False)
    assert storage_of(SDB) == "hdd"
    # virtio reports rotational; a virtual disk is taken for flash (--storage corrects it)
    assert (VDA["disk"], VDA["rotational"], VDA["virtual"]) == ("vda", True, True)
    assert storage_of(VDA) == "ssd"
    recorded_vm = json.loads((DATA / "doctor" / "recorded-vm.json").read_text())
    assert storage_of(recorded_vm["devices"]["data"]) == "ssd"


def test_device_settings_follow_the_disk() -> None:
    by_disk = {m.disk["disk"]: configure(m, "oltp") for m in MACHINES[:3]}
    values = {disk: chosen(config) for disk, config in by_disk.items()}
    assert values["nvme0n1"]["scheduler@nvme0n1"] == "none"
    assert values["sdb"]["scheduler@sdb"] == "mq-deadline"
    assert values["vda"]["scheduler@vda"] == "mq-deadline"
    assert values["nvme0n1"]["read_ahead_kb@nvme0n1"] == "4096"  # was 128
    assert values["vda"]["read_ahead_kb@vda"] == "8192"  # never lowered
    assert values["sdb"]["random_page_cost"] == "4" and values["vda"]["random_page_cost"] == "1.1"


# -- pg_settings rows as tune writes values -------------------------------------------------------


def recorded_rows() -> dict[str, dict[str, Any]]:
    data = json.loads((DATA / "doctor" / "recorded-vm.json").read_text())
    rows: dict[str, dict[str, Any]] = data["server"]["settings"]
    return rows


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("shared_buffers", "128MB"),
        ("work_mem", "4MB"),
        ("effective_cache_size", "4GB"),
        ("max_wal_size", "1GB"),
        ("checkpoint_timeout", "5min"),
        ("checkpoint_completion_target", "0.9"),
        ("random_page_cost", "4"),
        ("jit", "on"),
        ("io_method", "worker"),
        ("huge_pages", "try"),
        ("autovacuum_work_mem", "-1"),
        ("statement_timeout", "0ms"),
        ("max_connections", "100"),
        ("wal_buffers", "4MB"),
    ],
)
def test_pg_text_of_recorded_rows(name: str, text: str) -> None:
    assert pg_text(recorded_rows()[name]) == text


def test_shown_writes_automatic_defaults_as_tune_recommends_them() -> None:
    rows = recorded_rows()
    # wal_buffers at its default -1 shows 4MB (computed from 128MB of shared buffers): tune
    # recommends -1, and must see it as already in effect.
    assert shown(rows["wal_buffers"]) == "-1"
    assert shown(rows["autovacuum_work_mem"]) == "-1"
    assert shown(rows["shared_buffers"]) == "128MB"  # set in postgresql.conf by initdb
    set_there = {**rows["wal_buffers"], "source": "configuration file"}
    assert shown(set_there) == "4MB"


def test_every_recorded_row_is_written_back_as_postgresql_reads_it() -> None:
    """pg_text's text, given to PostgreSQL, is the value the row holds."""
    meta = recorded_settings(18)
    checked = 0
    for name, row in recorded_rows().items():
        entry = meta.get(name)
        if entry is None or entry.context == "internal" or row.get("setting") in (None, ""):
            continue
        text = pg_text(row)
        assert check_setting(meta, name, text, "18"), name
        if entry.vartype in ("integer", "real") and entry.unit and not text.startswith("-"):
            assert math.isclose(conf_value(text), setting_value(row)), (name, text)
        checked += 1
    assert checked > 200


def test_docs_list_every_recommendation_with_its_formula_reason_and_sources() -> None:
    """docs/tune.md's table of recommendations is data/tune.toml's, entry for entry."""
    from pgdyno.tune.reference import rewritten

    doc = Path(__file__).parent.parent.parent / "docs" / "tune.md"
    text = doc.read_text()
    assert text == rewritten(text), "run: python -m pgdyno.tune.reference docs/tune.md"
    for entry in load_knowledge():
        assert f"`{entry.name}` ({entry.spec.layer})" in text
