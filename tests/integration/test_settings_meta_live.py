"""pg_settings read from a real PostgreSQL 18 sandbox agrees with the recorded copy, and with
what `describe_settings` reads without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_env
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries, inspect_bin_dir
from pgdyno.postgres.client import connect
from pgdyno.postgres.settings import (
    SettingMeta,
    check_setting,
    load_settings_meta,
    settings_meta_from_json,
)
from pgdyno.postgres.settings_catalog import describe_config, describe_settings

RECORDED = Path(__file__).parent.parent / "data" / "pg_settings" / "pg18.json"


def live_settings(workdir: Path, cache_dir: Path, binaries: Binaries) -> dict[str, SettingMeta]:
    """pg_settings of a sandbox started for the purpose (and stopped again)."""
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    box.start({}, owner_pid=None)
    try:
        with connect(box.conninfo()) as client:
            return load_settings_meta(client)
    finally:
        box.stop()


def test_live_settings_match_the_recording(workdir: Path, cache_dir: Path, binaries: Binaries):
    live = live_settings(workdir, cache_dir, binaries)
    recorded = settings_meta_from_json(RECORDED)
    assert live.keys() == recorded.keys()
    for name, entry in live.items():
        old = recorded[name]
        assert (entry.vartype, entry.unit, entry.min_val, entry.max_val, entry.enumvals,
                entry.context) == (old.vartype, old.unit, old.min_val, old.max_val,
                                   old.enumvals, old.context), name  # fmt: skip
    assert live["shared_buffers"].needs_restart and not live["work_mem"].needs_restart
    assert check_setting(live, "shared_buffers", "1GB", "18") == "1GB"


def fields(entry: SettingMeta) -> tuple[object, ...]:
    return (entry.vartype, entry.unit, entry.min_val, entry.max_val, entry.enumvals, entry.context)


def test_described_settings_match_the_live_server(
    workdir: Path, cache_dir: Path, binaries: Binaries
):
    listing = sorted(p.name for p in workdir.iterdir())
    described = describe_settings(binaries)  # runs `postgres --describe-config`, as root too
    assert sorted(p.name for p in workdir.iterdir()) == listing
    assert len(describe_config(binaries)) > 250  # the binaries answered
    live = live_settings(workdir, cache_dir, binaries)
    assert live.keys() <= described.keys()
    for name, entry in live.items():
        assert fields(described[name]) == fields(entry), name
        assert described[name].complete, name


SYSTEM_15 = Path("/usr/lib/postgresql/15/bin")


@pytest.mark.skipif(not (SYSTEM_15 / "postgres").is_file(), reason="no Debian PostgreSQL 15")
def test_a_distribution_build_is_described_with_its_own_settings():
    binaries = inspect_bin_dir(SYSTEM_15, "system")
    described = describe_settings(binaries)
    own = described["extension_destdir"]  # a Debian patch, not in the wheels' recording
    assert own.vartype == "string" and not own.complete
    assert described["work_mem"].unit == "kB" and described["work_mem"].complete
    assert check_setting(described, "work_mem", "64MB", "15") == "64MB"
