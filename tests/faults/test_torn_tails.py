"""A torn tail of each journal kind blocks nothing; damage inside a complete line still does.

Issue 32: a journal's last line without its newline is a record whose write never completed.
Every record is written and fsynced before its change, so that change never happened: the line
is dropped on open with one log line, as a write-ahead log ends at its last whole record. On
the previous release a torn tail (`{"op": "change", ..., "name": "work_m`) blocked both
`tune --apply` and `rollback` until `--confirm-damaged`. A line that ends with its newline but
does not decode still needs the user, exactly as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Result, one_clear_sentence
from pgdyno.postgres.cluster import Sandbox

Cli = Callable[..., Result]

# One record of each kind, as the previous release wrote them (recorded from real runs, with
# the work directory as {w}); each is cut inside its "name" or "path" for the torn tail.
RECORDS = {
    "pg-journal.jsonl": {
        "op": "change", "id": 1, "server": {"kind": "sandbox", "cluster": "pg18"},
        "name": "work_mem", "old_auto": None, "old_setting": "4096", "old_source": "default",
        "new": "64MB", "restart": False, "at": "2026-11-23T07:00:00.000+00:00", "pid": 4242,
    },
    "host-journal.jsonl": {
        "op": "change", "id": 1, "kind": "sysctl", "name": "vm.swappiness", "device": None,
        "path": "/proc/sys/vm/swappiness", "old": "60", "new": "7",
        "at": "2026-11-23T07:00:00.000+00:00", "pid": 4242, "boot_id": "b",
    },
    "storage-journal.jsonl": {
        "op": "change", "id": 1, "kind": "image", "path": "{w}/storage/data.img",
        "at": "2026-11-23T07:00:00.000+00:00", "pid": 4242,
    },
}  # fmt: skip


def torn(name: str, workdir: Path) -> str:
    text = json.dumps(RECORDS[name]).replace("{w}", str(workdir))
    return text[: text.index('"name"' if '"name"' in text else '"path"') + 14]


@pytest.fixture
def cli(run_cli: Cli) -> Cli:
    return run_cli


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_torn_tail_does_not_block_rollback(
    cli: Cli, workdir: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    journal = workdir / name
    journal.write_text(torn(name, workdir))
    back = cli(workdir, "rollback")
    assert back.code == 0, back.stderr  # main: exit 1, "a damaged journal line ..."
    assert "nothing to restore" in back.stdout
    assert journal.read_text() == ""
    assert [m for m in caplog.messages if "never completed" in m and name in m] != []


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_damage_inside_a_complete_line_still_needs_the_user(
    cli: Cli, workdir: Path, name: str
) -> None:
    journal = workdir / name
    journal.write_text(torn(name, workdir)[:12] + "\n")  # too little left to restore
    back = cli(workdir, "rollback")
    assert back.code == 1 and "--confirm-damaged" in one_clear_sentence(back.stderr)
    assert cli(workdir, "rollback").code == 1  # kept until confirmed
    assert cli(workdir, "rollback", "--confirm-damaged").code == 0
    assert cli(workdir, "rollback").code == 0


def test_a_torn_tail_does_not_block_tune_apply(cli: Cli, workdir: Path, server: Sandbox) -> None:
    apply = ("tune", "--apply", "--dsn", server.conninfo(), "--layers", "postgresql",
             "--profile", "oltp")  # fmt: skip
    journal = workdir / "pg-journal.jsonl"
    journal.write_text(torn("pg-journal.jsonl", workdir))
    applied = cli(workdir, *apply)
    assert applied.code == 0, applied.stderr  # main: refused until --confirm-damaged
    assert cli(workdir, "rollback").code == 0

    journal.write_text(torn("pg-journal.jsonl", workdir) + "\n")  # damage in a complete line
    refused = cli(workdir, *apply)
    assert refused.code != 0 and "rollback" in one_clear_sentence(refused.stderr)
    assert cli(workdir, "rollback", "--confirm-damaged").code == 0
