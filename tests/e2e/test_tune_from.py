"""`pgdyno tune --from SNAPSHOT`: a doctor snapshot tunes offline exactly as the machine it was
taken on (a DBA snapshots production and tunes on a laptop)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from conftest import one_clear_sentence
from pgdyno.postgres.cluster import Sandbox
from pgdyno.textsafe import strict_loads

RECORDED_VM = Path(__file__).parent.parent / "data" / "doctor" / "recorded-vm.json"
OPTIONS = ("--pg-version", "18", "--profile", "oltp")


def without_free_space(data: dict[str, Any]) -> dict[str, Any]:
    """The output with the WAL file system's free bytes taken out, after checking them.

    The disk is shared with everything else on this machine, so its free bytes move between
    the doctor's reading and the live run's own; every value computed from them (max_wal_size,
    a quarter of them rounded down to whole GB, capped by the profile) must still agree."""
    facts = dict(data["facts"])
    free = facts.pop("wal_free")
    assert isinstance(free, int) and free > 0
    assert facts["sources"]["wal_free"].startswith("free space at /")
    return {**data, "facts": facts}


def untimed(data: dict[str, Any]) -> dict[str, Any]:
    """The output without the clock's cost and the track_io_timing it decides."""
    facts = {k: v for k, v in data["facts"].items() if k != "timing_ns"}
    facts["sources"] = {k: v for k, v in facts["sources"].items() if k != "timing_ns"}
    unknown = {k: v for k, v in data["unknown"].items() if "timing" not in k}
    settings = [s for s in data["settings"] if s["name"] != "track_io_timing"]
    return {**data, "facts": facts, "unknown": unknown, "settings": settings}


def untimed_table(text: str) -> list[str]:
    """The table without the observability group's (track_io_timing's) and the unknown lines,
    and without the count of settings to change (track_io_timing is one live)."""
    lines = re.sub(r": \d+ setting\(s\) to change", ": N setting(s) to change", text).splitlines()
    end = next((i for i, line in enumerate(lines) if "observability" in line), len(lines))
    rest = [line for line in lines[end:] if line.startswith("host (kernel)")]
    start = lines.index(rest[0]) if rest else len(lines)
    return [*lines[:end], *(line for line in lines[start:] if not line.startswith("unknown:"))]


@pytest.mark.exclusive("host")  # compares two readings of THP and sysctls: none may change
def test_a_doctor_snapshot_tunes_offline_as_the_live_server(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    snapshot = tmp_path / "sandbox.json"
    taken = run_cli(workdir, "doctor", "--sandbox", "--pg-version", "18", "--snapshot",
                    str(snapshot), "--json")  # fmt: skip
    assert taken.code in (0, 1), taken.stderr  # 1: findings at warning level, as expected
    facts = strict_loads(snapshot.read_text())
    data = facts["devices"]["data"]
    assert isinstance(data["free_bytes"], int) and data["scheduler"] in data["schedulers"]
    assert isinstance(facts["server"]["data_bytes"], int) and facts["server"]["data_bytes"] > 0
    assert "min_val" in facts["server"]["settings"]["shared_buffers"]

    live_json = run_cli(workdir, "tune", "--sandbox", *OPTIONS, "--json")
    live_table = run_cli(workdir, "tune", "--sandbox", *OPTIONS)
    live_pgtune = run_cli(workdir, "tune", "--sandbox", *OPTIONS, "--baseline", "pgtune", "--json")
    for result in (live_json, live_table, live_pgtune):
        assert result.code == 0, result.stderr
    box.stop()  # offline from here: nothing of the server is read

    laptop = tmp_path / "laptop"
    laptop.mkdir()
    from_json = run_cli(laptop, "tune", "--from", str(snapshot), *OPTIONS, "--json")
    from_table = run_cli(laptop, "tune", "--from", str(snapshot), *OPTIONS)
    from_pgtune = run_cli(laptop, "tune", "--from", str(snapshot), *OPTIONS, "--baseline",
                          "pgtune", "--json")  # fmt: skip
    for result in (from_json, from_table, from_pgtune):
        assert result.code == 0, result.stderr
    assert list(laptop.iterdir()) == []  # no sandbox, no journal, no results file

    # The one difference: the clock's cost (track_io_timing), which pg_test_timing measures
    # on the server's host only: live it is measured, from the file it is said unmeasured.
    assert untimed_table(from_table.stdout) == untimed_table(live_table.stdout)
    assert from_pgtune.stdout == live_pgtune.stdout
    live, offline = strict_loads(live_json.stdout), strict_loads(from_json.stdout)
    assert live["facts"]["sources"]["timing_ns"].startswith("pg_test_timing of PostgreSQL")
    assert offline["unknown"]["timing_ns"].startswith("unmeasured: a snapshot file")
    assert without_free_space(untimed(offline)) == without_free_space(untimed(live))
    assert offline["target"] == f"sandbox {box.root.name}" and offline["notes"] == []
    settings = offline["settings"]
    assert all(s["current"] is not None for s in settings if s["layer"] == "postgresql")
    assert {s["layer"] for s in settings} == {"postgresql", "host", "device"}
    assert "pg_settings" not in offline["unknown"]  # checked against the server's own


def test_an_older_snapshot_gives_unknown_facts_with_reasons(run_cli, workdir: Path) -> None:
    """recorded-vm.json predates the schedulers, the WAL free space and the cluster's size."""
    result = run_cli(workdir, "tune", "--from", str(RECORDED_VM), "--json")
    assert result.code == 0, result.stderr
    data = strict_loads(result.stdout)
    unknown = data["unknown"]
    assert "an older pgdyno's snapshot" in unknown["wal_free"]
    assert "server.data_bytes" in unknown["data_bytes"]
    assert "the snapshot has no ranges of the settings" in unknown["pg_settings"]
    assert unknown["device:scheduler@vda"].startswith("needs device.schedulers (")
    names = {s["name"] for s in data["settings"]}
    assert {"shared_buffers", "work_mem", "read_ahead_kb"} <= names
    assert data["target"] == "sandbox pg18"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--apply"], "--from changes nothing: run `pgdyno tune --apply` on the server's host"),
        (["--sandbox"], "--from tunes from a snapshot file: leave out --ram, --dsn and --sandbox"),
        (["--ram", "8GB"], "--from tunes from a snapshot file"),
        (["--verify"], "--verify measures the sandbox: leave out --from."),
    ],
    ids=["apply", "sandbox", "ram", "verify"],
)
def test_from_refuses_what_needs_a_server(
    run_cli, workdir: Path, args: list[str], message: str
) -> None:
    result = run_cli(workdir, "tune", "--from", str(RECORDED_VM), *args)
    assert result.code == 2, result.stderr
    assert message in one_clear_sentence(result.stderr)
    assert result.stdout == ""
    assert list(workdir.iterdir()) == []
