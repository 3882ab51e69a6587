"""Journals cut at every byte of their last record, and damaged in the middle, on real settings.

A last line without its newline is a record whose write never completed (issue 32): every
record is fsynced before its change, so pgdyno takes that change as never made. After each cut,
`pgdyno rollback` drops the torn record with one log line, exits 0 and puts back every change
the whole records name; the setting of the torn record is left as it is (here the cut was made
after the fact, so the test sets it back by hand, as the user would). Damage inside a complete
line still exits non-zero naming what the user must do, until `--confirm-damaged`.

The PostgreSQL journal is cut after a real `tune --apply --dsn` of a sandbox reached only
through --dsn; the host journal after real sysctl changes (root).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import IS_ROOT, Cli, one_clear_sentence
from pgdyno.host.knobs import Knob
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.host import HostChanges

PG_JOURNAL, HOST_JOURNAL = "pg-journal.jsonl", "host-journal.jsonl"
LIVE = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
SYSCTLS = ("vm.swappiness", "vm.dirty_expire_centisecs")


def pg_state(box: Sandbox) -> dict[str, Any]:
    with psycopg.connect(box.conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT name, setting, source FROM pg_settings").fetchall()
    return {"settings": {r[0]: r[1:] for r in rows},
            "auto_conf": (box.data_dir / "postgresql.auto.conf").read_text()}  # fmt: skip


def cuts(length: int) -> range:
    """Every byte of a record: the cut points swept."""
    return range(1, length)


def test_pg_journal_cut_at_every_point_of_its_last_record(
    run_cli: Cli, workdir: Path, server: Sandbox
) -> None:
    dsn = server.conninfo()
    apply = ("tune", "--apply", "--dsn", dsn, "--layers", "postgresql", "--profile", "oltp")
    before = pg_state(server)
    assert run_cli(workdir, *apply).code == 0
    lines = (workdir / PG_JOURNAL).read_text().splitlines()
    assert run_cli(workdir, "rollback").code == 0
    last = lines[-1]
    name = json.loads(last)["name"]
    for cut in cuts(len(last)):
        assert run_cli(workdir, *apply).code == 0
        journal = workdir / PG_JOURNAL
        fresh = journal.read_text().splitlines()  # the same changes, new time stamps
        # The same last record (track_io_timing comes and goes with the timing overhead the
        # advice measures on a busy machine, so the count of records above it may move).
        assert json.loads(fresh[-1])["name"] == name
        journal.write_text("\n".join(fresh[:-1]) + "\n" + fresh[-1][:cut])
        back = run_cli(workdir, "rollback")
        assert back.code == 0, (cut, back.stderr)
        # Everything the whole records say is back; the torn record's setting is left.
        left = {k for k, v in pg_state(server)["settings"].items()
                if v != before["settings"].get(k)}  # fmt: skip
        assert left <= {name}, (cut, left)
        assert run_cli(workdir, "rollback").code == 0
        with psycopg.connect(dsn, autocommit=True) as conn:  # the user sets it back by hand
            conn.execute(f"ALTER SYSTEM RESET {name}")
            conn.execute("SELECT pg_reload_conf()")
    print(f"PostgreSQL journal: {len(cuts(len(last)))} cuts, each torn record dropped")


@pytest.fixture
def sysctls() -> Iterator[dict[str, str]]:
    if not IS_ROOT:
        pytest.skip("changes sysctls: needs root")
    paths = {name: Path("/proc/sys", *name.split(".")) for name in SYSCTLS}
    before = {name: path.read_text().strip() for name, path in paths.items()}
    yield before
    for name, path in paths.items():
        path.write_text(before[name] + "\n")


def host_state() -> dict[str, str]:
    return {name: Path("/proc/sys", *name.split(".")).read_text().strip() for name in SYSCTLS}


def change_host(workdir: Path) -> list[str]:
    journal = workdir / HOST_JOURNAL
    with HostChanges(journal, keep=True, **LIVE) as host:
        host.apply(Knob.sysctl("vm.swappiness", **LIVE), 7)
        host.apply(Knob.sysctl("vm.dirty_expire_centisecs", **LIVE), 1234)
    return journal.read_text().splitlines()


def test_host_journal_cut_at_every_point_and_damaged_in_the_middle(
    run_cli: Cli, workdir: Path, sysctls: dict[str, str]
) -> None:
    before = host_state()
    lines = change_host(workdir)
    assert run_cli(workdir, "rollback").code == 0 and host_state() == before
    last = lines[-1]
    for cut in cuts(len(last)):
        fresh = change_host(workdir)  # the same changes, new time stamps
        assert len(fresh) == len(lines)
        (workdir / HOST_JOURNAL).write_text("\n".join(fresh[:-1]) + "\n" + fresh[-1][:cut])
        back = run_cli(workdir, "rollback")
        assert back.code == 0, (cut, back.stderr)
        assert host_state()["vm.swappiness"] == before["vm.swappiness"]  # whole: restored
        Path("/proc/sys/vm/dirty_expire_centisecs").write_text(
            before["vm.dirty_expire_centisecs"] + "\n"
        )  # the torn record's change, set back by the user
        assert host_state() == before
    print(f"host journal: {len(cuts(len(last)))} cuts, each torn record dropped")

    change_host(workdir)
    journal = workdir / HOST_JOURNAL
    text = journal.read_text().splitlines()
    journal.write_text("\n".join([text[0], "\x00garbage", *text[1:]]) + "\n")
    back = run_cli(workdir, "rollback")
    assert back.code == 1 and "line 2 of" in one_clear_sentence(back.stderr)
    assert host_state() == before  # both intact records restored
    refused = run_cli(workdir, "rollback")
    assert refused.code == 1  # kept until confirmed
    assert run_cli(workdir, "rollback", "--confirm-damaged").code == 0
    assert run_cli(workdir, "rollback").code == 0
