"""The settings DBAs expect (issue 31): logging, track_io_timing by the clock's measured cost,
idle sessions, TOAST compression and autovacuum on large tables; the observability group apart
in the table, --json and the written files, and `--no-observability` leaving it out.

The doctor flags none of them: for every machine and profile of test_tune_knowledge.py, the
doctor's findings on the configuration are the same with and without them.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pgdyno.doctor.evaluate import audit
from pgdyno.doctor.rules import load_rules
from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.postgres.timing import ClockTiming, parse_pg_test_timing
from pgdyno.tune.files import ALTER_SQL, PG_CONF, render_files
from pgdyno.tune.model import Configuration
from pgdyno.tune.recommend import recommend
from pgdyno.tune.session import UNTIMED_OFFLINE, UNTIMED_SNAPSHOT, Clock, from_snapshot, with_clock
from unit.test_tune_knowledge import CASES, IDS, MACHINES, Machine, machine_facts, snapshot_of

GiB = 1024**3
TIMING = Path(__file__).parent.parent / "data" / "pg_test_timing"
RECORDED_VM = Path(__file__).parent.parent / "data" / "doctor" / "recorded-vm.json"
OBSERVABILITY = {"log_checkpoints", "log_autovacuum_min_duration", "log_lock_waits",
                 "log_temp_files", "track_io_timing"}  # fmt: skip
EXPECTED = OBSERVABILITY | {
    "idle_in_transaction_session_timeout", "default_toast_compression",
    "autovacuum_vacuum_scale_factor", "autovacuum_analyze_scale_factor",
}  # fmt: skip


def configure(machine: Machine, profile: str, **facts: object) -> Configuration:
    known = replace(machine_facts(machine, profile), **facts)  # type: ignore[arg-type]
    return recommend(known, recorded_settings(machine.pg), {})


def values(config: Configuration) -> dict[str, str]:
    return {s.name: s.value for s in config.layer("postgresql") if s.status == "apply"}


# -- pg_test_timing, on its recorded output -----------------------------------------------------


@pytest.mark.parametrize("name", ["pg14", "pg15", "pg16", "pg17", "pg18", "debian-15"])
def test_pg_test_timing_of_every_version_is_read(name: str) -> None:
    text = (TIMING / f"{name}.txt").read_text()
    timing = parse_pg_test_timing(text)
    loop = re.search(r"overhead: ([0-9.]+) ns", text)
    assert loop is not None and timing.per_loop_ns == float(loop.group(1))
    assert timing.histogram[0][0] == 1 and len(timing.histogram) >= 10
    assert 99.9 <= sum(percent for _, percent, _ in timing.histogram) <= 100.1
    assert timing.below_1us_percent > 90  # this VM's TSC clock


def test_output_without_a_loop_time_is_one_sentence() -> None:
    with pytest.raises(Exception, match=r"pg_test_timing printed no loop time \(usage"):
        parse_pg_test_timing("usage: pg_test_timing [-d DURATION]\n")


# -- track_io_timing follows the measured cost ---------------------------------------------------


def test_track_io_timing_is_on_only_for_a_cheap_clock_and_says_the_figure() -> None:
    vm = MACHINES[0]
    fast = configure(vm, "oltp", timing_ns=29.4)
    slow = configure(vm, "oltp", timing_ns=722.0)  # HPET, the documentation's slow example
    fast_row = next(s for s in fast.settings if s.name == "track_io_timing")
    slow_row = next(s for s in slow.settings if s.name == "track_io_timing")
    assert fast_row.value == "on" and "measured 29.4 ns per clock read" in fast_row.why
    assert slow_row.value == "off" and "measured 722.0 ns per clock read" in slow_row.why
    assert "too costly here: left off" in slow_row.why
    assert fast_row.group == slow_row.group == "observability"


def test_offline_and_from_a_snapshot_the_clock_is_unmeasured_and_said_so() -> None:
    offline = configure(MACHINES[0], "oltp")  # machine_facts: offline_facts, no timing
    assert "track_io_timing" not in values(offline)
    assert offline.unknown["postgresql:track_io_timing"].startswith("needs timing_ns")
    facts = with_clock(machine_facts(MACHINES[0], "oltp"), Clock(None, UNTIMED_OFFLINE))
    config = recommend(facts, recorded_settings(18), {})
    assert UNTIMED_OFFLINE in config.unknown["postgresql:track_io_timing"]
    from pgdyno.tune.facts import Given

    gathered = from_snapshot(json.loads(RECORDED_VM.read_text()), Given(profile="oltp"))
    assert gathered.facts.unknown["timing_ns"] == UNTIMED_SNAPSHOT


def test_a_measured_clock_becomes_a_fact_with_its_source() -> None:
    clock = Clock(ClockTiming(26.82, ()), source="pg_test_timing of PostgreSQL 18.6 on this host")
    facts = with_clock(machine_facts(MACHINES[0], "oltp"), clock)
    assert facts.timing_ns == 26.82 and "timing_ns" not in facts.unknown
    assert facts.sources["timing_ns"].startswith("pg_test_timing")


# -- the values, by version ------------------------------------------------------------------------


@pytest.mark.parametrize("major", [14, 15, 16, 17, 18])
def test_the_settings_dbas_expect_on_every_version(major: int) -> None:
    machine = replace(MACHINES[1], pg=major)
    config = configure(machine, "oltp", timing_ns=30.0, data_bytes=200 * GiB)
    got = values(config)
    assert got.keys() >= EXPECTED, EXPECTED - got.keys()
    assert {k: got[k] for k in sorted(EXPECTED)} == {
        "autovacuum_analyze_scale_factor": "0.05",
        "autovacuum_vacuum_scale_factor": "0.05",
        "default_toast_compression": "lz4",  # the wheels are built with lz4
        "idle_in_transaction_session_timeout": "10min",
        "log_autovacuum_min_duration": "10min",
        "log_checkpoints": "on",
        "log_lock_waits": "on",
        "log_temp_files": "64MB",
        "track_io_timing": "on",
    }
    groups = {s.name: s.group for s in config.settings if s.name in EXPECTED}
    assert {n for n, g in groups.items() if g == "observability"} == OBSERVABILITY
    assert not config.notes  # every value passes its version's pg_settings


def test_small_clusters_keep_autovacuum_s_scale_factors() -> None:
    got = values(configure(MACHINES[1], "oltp", data_bytes=2 * GiB))
    assert "autovacuum_vacuum_scale_factor" not in got
    assert "autovacuum_analyze_scale_factor" not in got


def test_lz4_only_where_the_build_offers_it() -> None:
    meta = dict(recorded_settings(16))
    meta["default_toast_compression"] = replace(
        meta["default_toast_compression"], enumvals=("pglz",)
    )
    facts = machine_facts(MACHINES[1], "oltp")
    assert "default_toast_compression" not in values(recommend(facts, meta, {}))
    assert values(recommend(facts, recorded_settings(16), {}))["default_toast_compression"] == "lz4"


def test_log_temp_files_is_what_the_doctor_asks_for() -> None:
    """The doctor's temp-files-large rule tells to set log_temp_files to find the spilling
    queries; tune recommends the same threshold."""
    rule = next(r for r in load_rules() if r.id == "temp-files-large")
    asked = re.search(r"log_temp_files = '([^']+)'", rule.spec.fix)
    assert asked is not None
    assert values(configure(MACHINES[0], "oltp"))["log_temp_files"] == asked.group(1)


# -- the doctor flags none of them -----------------------------------------------------------------


@pytest.mark.parametrize(("machine", "profile"), CASES, ids=IDS)
def test_the_doctor_flags_none_of_the_settings_dbas_expect(machine: Machine, profile: str) -> None:
    config = configure(machine, profile, timing_ns=30.0, data_bytes=200 * GiB)
    assert EXPECTED - {"default_toast_compression"} <= values(config).keys()
    without = replace(config, settings=tuple(s for s in config.settings if s.name not in EXPECTED))
    rules = load_rules()
    with_them = audit(rules, snapshot_of(config, machine))
    without_them = audit(rules, snapshot_of(without, machine))
    assert {f.rule.id for f in with_them.findings} == {f.rule.id for f in without_them.findings}
    assert len(with_them.unchecked) == len(without_them.unchecked)


# -- the observability group in the output -------------------------------------------------------


def test_the_files_put_observability_in_a_section_of_its_own() -> None:
    config = configure(MACHINES[0], "oltp", timing_ns=30.0)
    files = render_files(config, generated_by="pgdyno tune test")
    for name, comment in ((PG_CONF, "#"), (ALTER_SQL, "--")):
        text = files[name]
        heading = text.index(f"{comment} -- Observability: logging and I/O timing.")
        for setting in OBSERVABILITY:
            assert text.index(f"{setting} = ") > heading, (name, setting)
        assert text.index("shared_buffers = ") < heading
        assert "--no-observability" in text
    facts = replace(machine_facts(MACHINES[0], "oltp"), timing_ns=30.0)
    performance = recommend(facts, recorded_settings(18), {}, groups=("performance",))
    assert {s.group for s in performance.settings} == {"performance"}
    bare = render_files(performance, generated_by="pgdyno tune test")
    assert "Observability" not in bare[PG_CONF] and "log_checkpoints" not in bare[ALTER_SQL]


def test_no_observability_leaves_them_out_of_table_json_and_files(
    run_cli, workdir: Path, tmp_path: Path
) -> None:
    args = ["tune", "--ram", "16GB", "--cpus", "8", "--pg-version", "14", "--storage", "ssd",
            "--profile", "oltp"]  # fmt: skip
    full = json.loads(run_cli(workdir, *args, "--json").stdout)
    groups = {row["name"]: row["group"] for row in full["settings"]}
    assert {n for n, g in groups.items() if g == "observability"} == OBSERVABILITY - {
        "track_io_timing"  # offline: the clock is unmeasured
    }
    assert "track_io_timing" in " ".join(full["unknown"])
    bare = json.loads(run_cli(workdir, *args, "--json", "--no-observability").stdout)
    assert {row["group"] for row in bare["settings"]} == {"performance"}
    assert {row["name"] for row in bare["settings"]} == {
        n for n, g in groups.items() if g == "performance"
    }
    table = run_cli(workdir, *args).stdout
    assert "PostgreSQL: observability" in table and "log_lock_waits" in table
    table = run_cli(workdir, *args, "--no-observability").stdout
    assert "observability" not in table and "log_lock_waits" not in table
    assert "track_io_timing" not in table  # not even as unknown: it was not asked for
    result = run_cli(workdir, *args, "--no-observability", "--out", str(tmp_path / "out"))
    assert result.code == 0, result.stderr
    assert "log_checkpoints" not in (tmp_path / "out" / PG_CONF).read_text()


def test_offline_the_data_size_class_decides_the_scale_factors() -> None:
    """--data-size's class times the memory stands for the cluster's size offline."""
    from pgdyno.tune.facts import Given, offline_facts

    def chosen(ram: int, data_size: str) -> dict[str, str]:
        given = Given("oltp", ram_bytes=ram, cpus=16, pg_version=17, storage="nvme",
                      data_size=data_size)  # type: ignore[arg-type]  # fmt: skip
        return values(recommend(offline_facts(given), recorded_settings(17), {}))

    assert chosen(64 * GiB, "greater_ram")["autovacuum_vacuum_scale_factor"] == "0.05"  # ~128 GB
    assert "autovacuum_vacuum_scale_factor" not in chosen(16 * GiB, "less_ram")  # ~5 GB
