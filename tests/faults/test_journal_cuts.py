"""Journals cut at every byte of their last record, and damaged in the middle, on real settings:
after each, `pgdyno rollback` leaves the server or host exactly as before, or exits non-zero
naming what the user must do. Never exit 0 with a change left behind.

The PostgreSQL journal is cut after a real `tune --apply --dsn` of a sandbox reached only
through --dsn; the host journal after real sysctl changes (root). The cut is what a file
system or a person can do to a journal after the fact: the changes it records were made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import IS_ROOT, Result, one_clear_sentence
from pgdyno.host.knobs import Knob
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.host import HostChanges

PG_JOURNAL, HOST_JOURNAL = "pg-journal.jsonl", "host-journal.jsonl"
LIVE = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
SYSCTLS = ("vm.swappiness", "vm.dirty_expire_centisecs")
Cli = Callable[..., Result]


@pytest.fixture
def cli(run_cli: Cli) -> Cli:
    return run_cli


def pg_state(box: Sandbox) -> dict[str, Any]:
    with psycopg.connect(box.conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT name, setting, source FROM pg_settings").fetchall()
    return {"settings": {r[0]: r[1:] for r in rows},
            "auto_conf": (box.data_dir / "postgresql.auto.conf").read_text()}  # fmt: skip


def cuts(length: int) -> range:
    """Every byte of a record: the cut points swept."""
    return range(1, length)


def test_pg_journal_cut_at_every_point_of_its_last_record(
    cli: Cli, workdir: Path, server: Sandbox
) -> None:
    dsn = server.conninfo()
    apply = ("tune", "--apply", "--dsn", dsn, "--layers", "postgresql", "--profile", "oltp")
    before = pg_state(server)
    assert cli(workdir, *apply).code == 0
    lines = (workdir / PG_JOURNAL).read_text().splitlines()
    assert cli(workdir, "rollback").code == 0
    last = lines[-1]
    exact = named = 0
    for cut in cuts(len(last)):
        assert cli(workdir, *apply).code == 0
        journal = workdir / PG_JOURNAL
        fresh = journal.read_text().splitlines()  # the same changes, new time stamps
        assert len(fresh) == len(lines)
        journal.write_text("\n".join(fresh[:-1]) + "\n" + fresh[-1][:cut])
        back = cli(workdir, "rollback")
        if back.code == 0:
            assert pg_state(server) == before, cut
            exact += 1
            continue
        sentence = one_clear_sentence(back.stderr)
        assert back.code == 1 and f"line {len(lines)} of" in sentence, (cut, sentence)
        assert "--confirm-damaged" in sentence
        # Everything the journal could still say is back; the cut setting is the user's to check.
        name = json.loads(last)["name"]
        left = {k for k, v in pg_state(server)["settings"].items()
                if v != before["settings"].get(k)}  # fmt: skip
        assert left <= {name}, (cut, left)
        confirmed = cli(workdir, "rollback", "--confirm-damaged")
        assert confirmed.code == 0, confirmed.stderr
        with psycopg.connect(dsn, autocommit=True) as conn:  # the user sets it back by hand
            conn.execute(f"ALTER SYSTEM RESET {name}")
            conn.execute("SELECT pg_reload_conf()")
        named += 1
    print(f"PostgreSQL journal: {exact + named} cuts, {exact} restored exactly, {named} named")
    assert exact and named


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
    cli: Cli, workdir: Path, sysctls: dict[str, str]
) -> None:
    before = host_state()
    lines = change_host(workdir)
    assert cli(workdir, "rollback").code == 0 and host_state() == before
    last = lines[-1]
    outcomes = {"exact": 0, "named": 0}
    for cut in cuts(len(last)):
        fresh = change_host(workdir)  # the same changes, new time stamps
        assert len(fresh) == len(lines)
        (workdir / HOST_JOURNAL).write_text("\n".join(fresh[:-1]) + "\n" + fresh[-1][:cut])
        back = cli(workdir, "rollback")
        if back.code == 0:
            assert host_state() == before, cut
            outcomes["exact"] += 1
            continue
        sentence = one_clear_sentence(back.stderr)
        assert back.code == 1 and "--confirm-damaged" in sentence, (cut, sentence)
        assert host_state()["vm.swappiness"] == before["vm.swappiness"]  # intact: restored
        assert cli(workdir, "rollback", "--confirm-damaged").code == 0
        Path("/proc/sys/vm/dirty_expire_centisecs").write_text(
            before["vm.dirty_expire_centisecs"] + "\n"
        )  # the user, by hand
        outcomes["named"] += 1
    print(f"host journal: {sum(outcomes.values())} cuts, {outcomes}")
    assert outcomes["exact"] and outcomes["named"]

    change_host(workdir)
    journal = workdir / HOST_JOURNAL
    text = journal.read_text().splitlines()
    journal.write_text("\n".join([text[0], "\x00garbage", *text[1:]]) + "\n")
    back = cli(workdir, "rollback")
    assert back.code == 1 and "line 2 of" in one_clear_sentence(back.stderr)
    assert host_state() == before  # both intact records restored
    refused = cli(workdir, "rollback")
    assert refused.code == 1  # kept until confirmed
    assert cli(workdir, "rollback", "--confirm-damaged").code == 0
    assert cli(workdir, "rollback").code == 0
