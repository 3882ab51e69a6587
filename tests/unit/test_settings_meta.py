"""Checking plan settings against the pg_settings of PostgreSQL 14 to 18, recorded from real
servers (tests/data/pg_settings)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from pgdyno.errors import BinariesError, UsageError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.settings import (
    SettingMeta,
    check_setting,
    check_settings,
    convert_to_setting_unit,
    format_amount,
    settings_meta_from_json,
    settings_meta_to_json,
)
from pgdyno.postgres.settings_catalog import (
    describe_settings,
    merge,
    parse_describe_config,
    recorded_settings,
)

DATA = Path(__file__).parent.parent / "data" / "pg_settings"
VERSIONS = [14, 15, 16, 17, 18]


@cache
def meta(major: int) -> dict[str, SettingMeta]:
    return settings_meta_from_json(DATA / f"pg{major}.json")


def check(major: int, name: str, value: object) -> str:
    return check_setting(meta(major), name, value, str(major))


def error(major: int, name: str, value: object) -> str:
    with pytest.raises(UsageError) as caught:
        check(major, name, value)
    message = str(caught.value)
    assert "\n" not in message and message.endswith((".", "?"))  # one sentence
    return message


# -- the recorded data --------------------------------------------------------------------------


@pytest.mark.parametrize("major", VERSIONS)
def test_recorded_data_is_the_version_it_is_named_for(major):
    settings = meta(major)
    assert settings["server_version"].setting.startswith(f"{major}.")
    assert settings["shared_buffers"] == SettingMeta(
        "shared_buffers", "integer", "8kB", 16.0, 1073741823.0, (), "postmaster", "16384"
    )
    assert {m.vartype for m in settings.values()} == {"bool", "integer", "real", "string", "enum"}


@pytest.mark.parametrize("major", VERSIONS)
def test_json_gives_back_the_recorded_file(major):
    path = DATA / f"pg{major}.json"
    assert settings_meta_to_json(meta(major)) == path.read_text()


def test_json_round_trip(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text(settings_meta_to_json(meta(18)))
    assert settings_meta_from_json(path) == meta(18)
    assert settings_meta_from_json(str(path)) == meta(18)


@pytest.mark.parametrize("major", VERSIONS)
def test_every_value_a_server_runs_with_passes(major):
    # What the recording sandbox ran with is valid by definition, in the setting's own unit.
    settings = meta(major)
    for entry in settings.values():
        if entry.context != "internal" and entry.setting is not None:
            check(major, entry.name, entry.setting)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("shared_buffers", True), ("max_connections", True), ("work_mem", False),
     ("checkpoint_timeout", False)],
)  # fmt: skip
@pytest.mark.parametrize("major", VERSIONS)
def test_needs_restart(major, name, expected):
    assert meta(major)[name].needs_restart is expected


def test_autovacuum_max_workers_needs_no_restart_from_18():
    assert meta(17)["autovacuum_max_workers"].needs_restart
    assert not meta(18)["autovacuum_max_workers"].needs_restart


# -- valid values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("shared_buffers", "128MB", "128MB"),
        ("shared_buffers", "6GB", "6GB"),
        ("shared_buffers", 16384, "16384"),  # bare: 16384 x 8kB
        ("shared_buffers", "64 MB", "64 MB"),
        ("shared_buffers", "1.5GB", "1.5GB"),
        ("shared_buffers", "128kB", "128kB"),  # the minimum, 16 x 8kB
        ("work_mem", "4MB", "4MB"),
        ("checkpoint_timeout", "30s", "30s"),
        ("checkpoint_timeout", "5min", "5min"),
        ("checkpoint_timeout", 300, "300"),
        ("checkpoint_timeout", "0.5min", "0.5min"),
        ("checkpoint_timeout", "1d", "1d"),  # the maximum
        ("random_page_cost", 1.1, "1.1"),
        ("random_page_cost", "4", "4"),
        ("random_page_cost", 4, "4"),
        ("vacuum_cost_delay", "2ms", "2ms"),
        ("vacuum_cost_delay", "500us", "500us"),
        ("jit", False, "off"),
        ("jit", "on", "on"),
        ("jit", "Yes", "on"),
        ("synchronous_commit", "OFF", "off"),
        ("synchronous_commit", True, "on"),  # enums with on/off take every boolean spelling
        ("synchronous_commit", "yes", "on"),
        ("effective_io_concurrency", 200, "200"),
        ("huge_pages", "try", "try"),
        ("huge_pages", "TRUE", "on"),
        ("max_wal_size", "1GB", "1GB"),
        ("wal_buffers", -1, "-1"),
        ("statement_timeout", 0, "0"),
        ("max_connections", " 200 ", "200"),
        ("client_min_messages", "debug", "debug2"),  # hidden spellings of pg_settings
        ("wal_level", "hot_standby", "replica"),
        ("default_transaction_isolation", "Repeatable Read", "repeatable read"),
        ("TimeZone", "Europe/Berlin", "Europe/Berlin"),
        ("timezone", "UTC", "UTC"),  # names are case-insensitive
        ("search_path", "", ""),  # strings are taken as they are
        ("pg_stat_statements.max", 10000, "10000"),  # extensions' settings are not known
        ("pg_stat_statements.track", "all", "all"),
    ],
)
@pytest.mark.parametrize("major", VERSIONS)
def test_valid(major, name, value, expected):
    assert check(major, name, value) == expected


@pytest.mark.parametrize("major", [15, 16, 17, 18])
def test_wal_compression_lz4_from_15(major):
    assert check(major, "wal_compression", "lz4") == "lz4"
    assert check(major, "wal_compression", "LZ4") == "lz4"


def test_wal_compression_is_a_bool_on_14():
    assert check(14, "wal_compression", True) == "on"
    assert check(14, "wal_compression", "off") == "off"


def test_log_connections_is_a_bool_up_to_17_and_a_list_on_18():
    assert check(17, "log_connections", True) == "on"
    assert check(18, "log_connections", True) == "on"
    assert check(18, "log_connections", "receipt,authentication") == "receipt,authentication"
    assert "PostgreSQL 17" in error(17, "log_connections", "receipt")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("on", "on"), ("ON", "on"), ("off", "off"), ("of", "off"), ("true", "on"), ("t", "on"),
     ("TR", "on"), ("false", "off"), ("f", "off"), ("yes", "on"), ("y", "on"), ("no", "off"),
     ("n", "off"), ("1", "on"), ("0", "off"), (1, "on"), (0, "off")],
)  # fmt: skip
def test_boolean_spellings(text, expected):
    assert check(18, "jit", text) == expected


@pytest.mark.parametrize("text", ["o", "", "onn", "truex", "01", "2", " on", "maybe", 2, 0.5])
def test_not_booleans(text):
    assert "jit is on or off" in error(18, "jit", text)


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        # rounded to the nearest (ties to even) before the range check, as PostgreSQL does
        ("max_connections", "0.5", False),
        ("max_connections", "0.6", True),
        ("max_connections", 1.5, True),
        ("shared_buffers", "127kB", True),  # 15.875 pages -> 16
        ("shared_buffers", "120kB", False),  # 15 pages
        ("checkpoint_timeout", "29.5s", True),  # -> 30
        ("checkpoint_timeout", "29.4s", False),
        ("checkpoint_timeout", "29500ms", True),
        ("checkpoint_timeout", "86400.4", True),
        ("checkpoint_timeout", "86400.6", False),
        # strtol's octal and hex, strtod's exponent
        ("max_connections", "0x10", True),
        ("max_connections", "0777777", True),  # octal 262143, the maximum
        ("effective_io_concurrency", "1e3", True),
        ("effective_io_concurrency", "1e4", False),
        ("effective_io_concurrency", "01750", True),  # octal 1000
        ("effective_io_concurrency", "01751", False),  # octal 1001
        ("effective_io_concurrency", "1751", False),
    ],
)
def test_numbers_are_read_as_postgresql_reads_them(name, value, valid):
    if valid:
        assert check(18, name, value) == str(value).strip()
    else:
        assert "out of range" in error(18, name, value)


def test_check_settings_checks_a_whole_table():
    plan = {"shared_buffers": "6GB", "jit": False, "wal_compression": "lz4"}
    assert check_settings(meta(16), plan, "16") == {
        "shared_buffers": "6GB", "jit": "off", "wal_compression": "lz4",
    }  # fmt: skip
    with pytest.raises(UsageError, match="PostgreSQL 14"):
        check_settings(meta(14), plan, "14")


# -- invalid values -----------------------------------------------------------------------------


@pytest.mark.parametrize("major", VERSIONS)
def test_unknown_name_with_a_suggestion(major):
    message = error(major, "shared_buffer", "1GB")
    assert message == (
        f"PostgreSQL {major} has no setting 'shared_buffer': did you mean shared_buffers?"
    )
    assert "did you mean checkpoint_timeout?" in error(major, "checkpoint_timout", 30)


def test_unknown_name_without_a_suggestion():
    assert error(18, "frobnicate", 1).startswith("PostgreSQL 18 has no setting 'frobnicate': ")


def test_a_setting_that_is_gone():
    assert "PostgreSQL 17 has no setting 'old_snapshot_threshold'" in error(
        17, "old_snapshot_threshold", -1
    )
    assert check(16, "old_snapshot_threshold", -1) == "-1"


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("shared_buffers", "6XB", ["unknown unit 'XB'", "B, kB, MB, GB or TB", "8kB"]),
        ("shared_buffers", "6gb", ["unknown unit 'gb'", "case matters"]),
        ("shared_buffers", "64MB extra", ["unknown unit 'MB extra'"]),
        ("shared_buffers", "1s", ["time unit 's'", "memory setting", "B, kB, MB, GB or TB"]),
        ("shared_buffers", "lots", ["is not a number", "memory unit"]),
        ("shared_buffers", "", ["shared_buffers = '' is not a number"]),
        ("shared_buffers", "nan", ["is not a number"]),
        ("shared_buffers", True, ["shared_buffers = true is not a number"]),
        ("shared_buffers", "9TB", ["out of range", "between 128kB and just under 8TB"]),
        ("checkpoint_timeout", "10", ["out of range", "between 30s and 1d"]),
        ("checkpoint_timeout", "29s", ["checkpoint_timeout = 29s is out of range"]),
        ("checkpoint_timeout", "2GB", ["memory unit 'GB'", "time setting", "us, ms, s, min, h"]),
        ("checkpoint_timeout", "2d", ["out of range"]),
        ("random_page_cost", -1, ["random_page_cost = -1 is out of range", "at least 0"]),
        ("random_page_cost", "1ms", ["has a unit", "drop 'ms'"]),
        ("random_page_cost", "inf", ["out of range"]),
        ("vacuum_cost_delay", "200ms", ["between 0 and 100ms"]),
        ("vacuum_cost_delay", "1kB", ["memory unit 'kB'"]),
        ("jit", "maybe", ["jit = maybe is not valid in PostgreSQL 18", "on or off"]),
        ("max_connections", 0, ["max_connections = 0 is out of range", "between 1 and 262143"]),
        ("max_connections", "100MB", ["has a unit", "whole number", "drop 'MB'"]),
        ("synchronous_commit", "sometimes", ["local, remote_write, remote_apply, on or off"]),
        ("synchronous_commit", " on", ["is not valid"]),
        ("huge_pages", "t", ["off, on or try"]),  # enums take whole words only
        ("statement_timeout", "-5", ["between 0 and just under 24.9d"]),
        ("block_size", 16384, ["block_size is fixed", "remove it from the plan"]),
        ("wal_segment_size", "64MB", ["cannot be set"]),
        ("shared_buffers", [1, 2], ["shared_buffers is given a list ([1, 2])", "one value"]),
        ("shared_buffers", {"a": 1}, ["is given a dict"]),
        ("jit", None, ["jit is given a NoneType", "on or off"]),
        ("pg_stat_statements.max", [1], ["is given a list"]),
    ],
)  # fmt: skip
def test_invalid(name, value, words):
    message = error(18, name, value)
    for word in words:
        assert word in message


def test_enum_values_are_those_of_the_version():
    message = error(14, "wal_compression", "lz4")
    assert message.startswith("wal_compression = lz4 is not valid in PostgreSQL 14")
    assert "on or off" in message
    # these builds have zstd only from 16
    assert error(15, "wal_compression", "zstd").endswith("use one of pglz, lz4, on or off.")
    assert check(16, "wal_compression", "zstd") == "zstd"


def test_ranges_are_those_of_the_version():
    assert "between 1MB and" in error(16, "maintenance_work_mem", "512kB")
    assert check(17, "maintenance_work_mem", "512kB") == "512kB"
    assert "between 8kB and 256kB" in error(17, "io_combine_limit", "512kB")
    assert check(18, "io_combine_limit", "512kB") == "512kB"


# -- the helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "unit", "setting_unit", "expected"),
    [
        (6, "GB", "8kB", 786432.0),
        (64, "MB", "8kB", 8192.0),
        (1, "TB", "MB", 1048576.0),
        (4096, "B", "kB", 4.0),
        (1.0004, "GB", "kB", 1048576.0),  # rounded to whole MB first, as PostgreSQL does
        (30.1, "GB", "MB", 30822.0),
        (5, "min", "s", 300.0),
        (1.5, "h", "min", 90.0),
        (1, "d", "ms", 86_400_000.0),
        (250, "us", "ms", 0.25),
        (1, "s", "kB", None),
        (1, "GB", "s", None),
        (1, "XB", "kB", None),
    ],
)
def test_convert_to_setting_unit(number, unit, setting_unit, expected):
    assert convert_to_setting_unit(number, unit, setting_unit) == expected


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (16, "8kB", "128kB"),
        (16384, "8kB", "128MB"),
        (1073741823, "8kB", "just under 8TB"),
        (64, "kB", "64kB"),
        (2147483647, "kB", "just under 2TB"),
        (1024, "MB", "1GB"),
        (1536, "MB", "1.5GB"),
        (1000, "8kB", "8000kB"),
        (1048576, "B", "1MB"),
        (30, "s", "30s"),
        (86400, "s", "1d"),
        (90, "min", "1.5h"),
        (35791394, "min", "just over 24855d"),
        (2.5, "ms", "2.5ms"),
        (0.25, "ms", "250us"),
        (0, "ms", "0"),
        (-1, "kB", "-1"),
        (262143, None, "262143"),
        (0.001, None, "0.001"),
        (1.79769e308, None, "1.79769e+308"),
        (5, "furlong", "5"),
    ],
)
def test_format_amount(value, unit, expected):
    assert format_amount(value, unit) == expected


# -- the catalog shipped with pgdyno (no cluster needed) ------------------------------------------


@pytest.mark.parametrize("major", VERSIONS)
def test_shipped_catalog_is_the_recording(major):
    shipped = recorded_settings(major)
    assert shipped.keys() == meta(major).keys()
    for name, entry in meta(major).items():
        assert shipped[name] == SettingMeta(
            entry.name, entry.vartype, entry.unit, entry.min_val, entry.max_val,
            entry.enumvals, entry.context,
        ), name  # fmt: skip


def test_describe_settings_without_binaries_is_the_recording(tmp_path):
    missing = Binaries(tmp_path / "nothing" / "bin", "16", "not installed")
    described = describe_settings(missing)
    assert described["work_mem"].unit == "kB"
    assert described["wal_compression"].enumvals == ("pglz", "lz4", "zstd", "on", "off")
    assert not (tmp_path / "nothing").exists()


def test_describe_settings_of_an_unrecorded_missing_version_says_so(tmp_path):
    with pytest.raises(BinariesError, match=r"PostgreSQL 13 is neither installed .* recorded"):
        describe_settings(Binaries(tmp_path / "bin", "13.4", "not installed"))


def test_settings_only_the_binaries_know_are_left_to_postgresql():
    described = parse_describe_config(
        "extension_destdir\tsuperuser\tClient\tSTRING\t\t\t\tx\t\n"
        "vendor_mem\tuser\tResource Usage\tINTEGER\t0\t64\t2147483647\tx\t\n"
        "vendor_mode\tuser\tResource Usage\tENUM\tfast\t\t\tx\t\n"
    )
    merged = merge(meta(15), described)
    # Units and enum values are unknown: PostgreSQL judges values that use them...
    assert check_setting(merged, "vendor_mem", "4MB", "15") == "4MB"
    assert check_setting(merged, "vendor_mode", "turbo", "15") == "turbo"
    # ...but bare numbers are still held to the range the binaries describe.
    with pytest.raises(UsageError, match="out of range"):
        check_setting(merged, "vendor_mem", 1, "15")
    assert merged["work_mem"].unit == "kB" and merged["work_mem"].complete
