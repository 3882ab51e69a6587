"""The defaults of each recorded PostgreSQL version (the `default` column of
data/pg_settings/catalog.csv, recorded by scripts/record_pg_settings.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgdyno.postgres.settings import check_setting
from pgdyno.postgres.settings_catalog import (
    CATALOG_COLUMNS,
    CATALOG_FILE,
    parse_catalog,
    recorded_defaults,
    recorded_majors,
    recorded_settings,
)

VERSIONS = [14, 15, 16, 17, 18]
RECORDED_VM = Path(__file__).parent.parent / "data" / "doctor" / "recorded-vm.json"


def test_every_recorded_version_has_defaults():
    assert recorded_majors() == VERSIONS
    for major in VERSIONS:
        defaults = recorded_defaults(major)
        assert len(defaults) > 0.8 * len(recorded_settings(major))
        assert defaults.keys() <= recorded_settings(major).keys()


@pytest.mark.parametrize("major", VERSIONS)
def test_each_default_is_a_value_its_version_accepts(major):
    meta = recorded_settings(major)
    for name, value in recorded_defaults(major).items():
        check_setting(meta, name, value, str(major))


@pytest.mark.parametrize("major", VERSIONS)
def test_defaults_as_pg_settings_shows_them(major):
    defaults = recorded_defaults(major)
    if major == 14:  # boots at 1024 (8MB) but initdb writes 128MB: no default to assume
        assert "shared_buffers" not in defaults
    else:
        assert defaults["shared_buffers"] == "16384"  # unit 8kB: 128MB, as initdb writes too
    assert defaults["max_connections"] == "100"
    assert defaults["autovacuum_work_mem"] == "-1"
    assert defaults["superuser_reserved_connections"] == "3"
    assert defaults["huge_pages"] == "try"
    assert defaults["fsync"] == "on"
    assert defaults["maintenance_work_mem"] == "65536"  # kB
    assert defaults["hash_mem_multiplier"] == ("1" if major == 14 else "2")


@pytest.mark.parametrize("major", VERSIONS)
def test_no_default_for_what_is_not_one(major):
    defaults, meta = recorded_defaults(major), recorded_settings(major)
    internal = {name for name, entry in meta.items() if entry.context == "internal"}
    assert not internal & defaults.keys()  # read-only, computed or built in
    for name in ("data_directory", "config_file", "hba_file", "unix_socket_directories",
                 "ssl_cert_file", "TimeZone", "log_timezone", "lc_messages", "DateStyle",
                 "dynamic_shared_memory_type", "max_stack_depth", "client_encoding",
                 "transaction_isolation", "shared_memory_size_in_huge_pages"):  # fmt: skip
        assert name not in defaults, name


def test_defaults_agree_with_another_recording():
    """The PostgreSQL 18 sandbox recorded by `pgdyno doctor --snapshot` shows the same
    boot_val for every setting the catalog gives a default."""
    settings = json.loads(RECORDED_VM.read_text())["server"]["settings"]
    assert settings["server_version"]["setting"].startswith("18.")
    differ = {
        name: (value, settings[name]["boot_val"])
        for name, value in recorded_defaults(18).items()
        if settings[name]["boot_val"] != value
    }
    assert differ == {}


@pytest.mark.parametrize("major", VERSIONS)
def test_catalog_rows_have_the_catalog_columns(major):
    rows = parse_catalog(CATALOG_FILE.read_text())[major]
    assert {len(row) for row in rows} == {len(CATALOG_COLUMNS)}
    assert CATALOG_COLUMNS[-1] == "boot_val"


def test_an_unrecorded_version_has_no_defaults():
    assert recorded_defaults(13) == {} and recorded_defaults(19) == {}
