"""Advice that knows its context (issue 31, item 2): a container's host settings are the host
administrator's, dirty-page limits scale with RAM, tune and the doctor give one value, a
multi-queue disk keeps `none`, nothing asks for a restart that changes nothing, and each
PostgreSQL version gets the values it takes.

Pure: recorded doctor snapshots (tests/data/doctor), recorded disks (tests/data/sys) and the
recorded pg_settings catalogs of each version; tests/e2e/test_tune_context.py starts a real
server with the files written for the same cases.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pgdyno.doctor.evaluate import audit
from pgdyno.doctor.rules import load_rules
from pgdyno.errors import UsageError
from pgdyno.postgres.settings import check_setting
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.records.tune import Disk, Storage
from pgdyno.tune.facts import Given, offline_facts
from pgdyno.tune.files import ALTER_SQL, PG_CONF, README, SYSCTL, THP, UDEV, render_files
from pgdyno.tune.model import Configuration
from pgdyno.tune.recommend import recommend
from pgdyno.tune.session import from_snapshot

DATA = Path(__file__).parent.parent / "data"
MiB, GiB = 1024**2, 1024**3


def snapshot(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "doctor" / f"{name}.json").read_text())
    return data


def tuned(data: dict[str, Any], profile: str = "oltp") -> Configuration:
    gathered = from_snapshot(data, Given(profile))  # type: ignore[arg-type]
    return recommend(gathered.facts, gathered.meta, gathered.current)


def by_key(config: Configuration) -> dict[str, str]:
    return {s.key: s.value for s in config.settings}


# -- containers ----------------------------------------------------------------------------------


def test_a_container_leaves_host_settings_to_the_hosts_administrator() -> None:
    config = tuned(snapshot("container-4g-on-64g"))
    outside = [s for s in config.settings if s.layer != "postgresql"]
    assert {s.name for s in outside} >= {
        "vm.dirty_bytes", "vm.swappiness", "vm.overcommit_ratio", "transparent_hugepage/enabled",
        "kernel.sched_autogroup_enabled", "read_ahead_kb",
    }  # fmt: skip
    assert {s.status for s in outside} == {"host"}
    assert {s.layer for s in config.to_apply()} == {"postgresql"}  # --apply changes no host
    assert any("runs in a docker container" in note for note in config.notes)
    # Host values are the host's: dirty limits from its 64 GB, not from the 4 GB limit.
    values = by_key(config)
    assert values["vm.dirty_bytes"] == str(512 * MiB)
    assert values["vm.dirty_background_bytes"] == str(64 * MiB)
    # PostgreSQL's memory is sized from the limit.
    assert values["shared_buffers"] == "1GB"
    # 1GB needs no huge pages (huge_pages is left out): neither do the pages, which were
    # reported as unknown ("needs huge_pages") before.
    assert "huge_pages" not in values and "vm.nr_hugepages" not in values
    assert not [key for key in config.unknown if "nr_hugepages" in key], config.unknown


def test_a_containers_files_carry_no_host_setting() -> None:
    files = render_files(tuned(snapshot("container-4g-on-64g")), generated_by="pgdyno tune test")
    assert {SYSCTL, UDEV, THP}.isdisjoint(files)
    assert {PG_CONF, ALTER_SQL, README} <= set(files)
    readme = files[README]
    assert "For the host's administrator: this server runs in a docker container" in readme
    part = readme.split("For the host's administrator")[1]
    for name in ("vm.dirty_bytes = 536870912", "transparent_hugepage/enabled = never",
                 "vm.overcommit_ratio = 80", "read_ahead_kb (vda) = 8192"):  # fmt: skip
        assert name in part, name
    assert "install -m 644" not in readme  # nothing to install on the host from here


def test_outside_a_container_host_settings_are_written() -> None:
    files = render_files(tuned(snapshot("healthy")), generated_by="pgdyno tune test")
    assert {SYSCTL, THP} <= set(files) and "host's administrator" not in files[README]


# -- one value for one setting ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rule", "setting"),
    [
        ("recorded-vm", "shared-buffers-small", "shared_buffers"),  # doctor 5GB, tune 6016MB
        ("container-4g-on-64g", "shared-buffers-large", "shared_buffers"),
    ],
)
def test_doctor_and_tune_recommend_the_same_value(name: str, rule: str, setting: str) -> None:
    data = snapshot(name)
    found = {f.rule.id: f for f in audit(load_rules(), data).findings}
    assert found[rule].recommended == by_key(tuned(data))[setting]


def test_doctor_and_tune_give_the_same_effective_cache_size() -> None:
    data = snapshot("recorded-vm")
    data["server"]["settings"]["effective_cache_size"]["setting"] = "524288"  # 4GB: too low
    found = {f.rule.id: f for f in audit(load_rules(), data).findings}
    assert (
        found["effective-cache-size-low"].recommended == by_key(tuned(data))["effective_cache_size"]
    )


def test_the_desktop_profile_gets_values_the_doctor_accepts() -> None:
    """pgtune's desktop (1/16 and 1/4 of RAM) was flagged by shared-buffers-small and
    effective-cache-size-low; the whole agreement is tests/unit/test_tune_knowledge.py's."""
    data = snapshot("recorded-vm")
    values = by_key(tuned(data, "desktop"))
    for name in ("shared_buffers", "effective_cache_size"):
        data["server"]["settings"][name] = {"setting": values[name], "source": "configuration file"}
    fired = {f.rule.id for f in audit(load_rules(), data).findings}
    assert not {"shared-buffers-small", "effective-cache-size-low"} & fired
    assert (values["shared_buffers"], values["effective_cache_size"]) == ("2944MB", "12032MB")


# -- dirty-page limits -------------------------------------------------------------------------


def offline(ram: int, pg: int = 17, profile: str = "oltp") -> Configuration:
    facts = offline_facts(Given(profile, ram_bytes=ram, cpus=2, pg_version=pg))  # type: ignore[arg-type]
    return recommend(facts, recorded_settings(pg), {})


@pytest.mark.parametrize("ram", [512 * MiB, 1 * GiB, 2 * GiB, 4 * GiB, 16 * GiB, 256 * GiB])
def test_dirty_limits_never_raise_the_kernels_defaults(ram: int) -> None:
    """The kernel's defaults are 10% and 20% of the memory it may dirty; the memory budget of
    work_mem leaves at least a quarter of RAM outside PostgreSQL, so that is the least it has."""
    values = by_key(offline(ram))
    background, dirty = int(values["vm.dirty_background_bytes"]), int(values["vm.dirty_bytes"])
    assert background <= ram // 4 * 10 // 100 and dirty <= ram // 4 * 20 // 100
    assert background <= 64 * MiB and dirty <= 512 * MiB and background < dirty
    if ram >= 16 * GiB:  # the seeds' values where the kernel's defaults are far above them
        assert (background, dirty) == (64 * MiB, 512 * MiB)


def test_a_small_host_gets_smaller_dirty_limits() -> None:
    values = by_key(offline(512 * MiB))
    assert (values["vm.dirty_background_bytes"], values["vm.dirty_bytes"]) == (
        str(12 * MiB), str(25 * MiB)
    )  # fmt: skip


# -- block devices -----------------------------------------------------------------------------


def with_disk(config_storage: Storage, scheduler: str, offered: tuple[str, ...]) -> str:
    facts = offline_facts(Given("oltp", ram_bytes=8 * GiB, cpus=4, pg_version=17,
                                storage=config_storage))  # fmt: skip
    facts = replace(facts, local=True, devices=(Disk("vda", "data", scheduler, offered, 4096),))
    return by_key(recommend(facts, recorded_settings(17), {}))["scheduler@vda"]


VIRTIO = ("none", "mq-deadline", "kyber", "bfq")  # tests/data/sys/firecracker-vda


@pytest.mark.parametrize(
    ("storage", "scheduler", "offered", "chosen"),
    [
        ("ssd", "none", VIRTIO, "none"),  # multi-queue virtio: the kernel chose none
        ("nvme", "none", ("none", "mq-deadline"), "none"),
        ("ssd", "mq-deadline", VIRTIO, "mq-deadline"),  # single-queue: left as the kernel chose
        ("ssd", "bfq", VIRTIO, "mq-deadline"),  # what scheduler-flash flags
        ("hdd", "none", VIRTIO, "mq-deadline"),  # a spinning disk needs one
        ("nvme", "mq-deadline", ("none", "mq-deadline"), "none"),
    ],
)
def test_none_is_kept_on_flash(storage: Storage, scheduler: str, offered: tuple[str, ...],
                               chosen: str) -> None:  # fmt: skip
    assert with_disk(storage, scheduler, offered) == chosen


# -- no restart for nothing ------------------------------------------------------------------


def test_files_ask_for_no_restart_when_every_restart_setting_is_in_effect() -> None:
    config = tuned(snapshot("recorded-vm"))
    restart = [s for s in config.layer("postgresql") if s.takes_effect == "restart"]
    assert {"shared_buffers", "wal_buffers", "max_connections"} <= {s.name for s in restart}
    files = render_files(config, generated_by="pgdyno tune test")
    assert "restart PostgreSQL (needed by" in files[README]
    assert "Restart PostgreSQL" in files[ALTER_SQL]
    # The same advice once it is in effect: every restart-only value is the current one.
    settled = replace(config, settings=tuple(
        replace(s, current=s.value) if s.takes_effect == "restart" else s for s in config.settings
    ))  # fmt: skip
    files = render_files(settled, generated_by="pgdyno tune test")
    assert "restart PostgreSQL" not in files[README]
    assert "Restart PostgreSQL" not in files[ALTER_SQL]


def test_wal_buffers_at_its_default_is_in_effect_and_its_reason_holds_below_512mb() -> None:
    config = tuned(snapshot("recorded-vm"))  # the sandbox's defaults: wal_buffers -1 (4MB)
    wal = next(s for s in config.settings if s.name == "wal_buffers")
    assert (wal.value, wal.current, wal.changes) == ("-1", "-1", False)
    assert "16MB at these sizes" not in wal.why
    assert "1/32 of shared_buffers" in wal.why and "reached from 512MB" in wal.why


# -- versions ------------------------------------------------------------------------------------


def test_postgresql_14_gets_wal_compression_on() -> None:
    """14's wal_compression is a boolean (pglz); 15 on choose a method, lz4 where built."""
    values = offline(8 * GiB, pg=14).pg_values()
    assert values["wal_compression"] == "on"
    assert check_setting(recorded_settings(14), "wal_compression", "on", "14")
    with pytest.raises(UsageError, match="where wal_compression is on or off"):
        check_setting(recorded_settings(14), "wal_compression", "lz4", "14")


@pytest.mark.parametrize("pg", [15, 16, 17, 18])
def test_later_versions_get_lz4_where_built(pg: int) -> None:
    meta = recorded_settings(pg)
    values = offline(8 * GiB, pg=pg).pg_values()
    if "lz4" in meta["wal_compression"].enumvals:
        assert values["wal_compression"] == "lz4"
    else:
        assert "wal_compression" not in values


def test_offline_huge_pages_are_a_to_do_with_the_command_for_the_figure() -> None:
    config = offline(64 * GiB)
    assert config.pg_values()["huge_pages"] == "try"
    todo = next(s for s in config.settings if s.name == "vm.nr_hugepages")
    assert todo.status == "todo" and int(todo.value) > 16 * GiB // (2 * MiB)
    assert "postgres -D DATADIR -C shared_memory_size_in_huge_pages" in todo.why
    assert config.facts.sources["huge_page"] == "assumed offline: x86-64's 2MB huge pages"
    huge = next(s for s in config.settings if s.name == "huge_pages")
    assert "below" not in huge.why  # it names no line that may be missing
    sysctl = render_files(config, generated_by="pgdyno tune test")[SYSCTL]
    assert f"# to do on the server's host: vm.nr_hugepages = {todo.value}" in sysctl
