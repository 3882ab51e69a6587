"""The PostgreSQL journal cut across its last record (`cuts`), on a real server's settings.

A last line without its newline is a record whose write never completed (issue 32): every
record is fsynced before its change, so pgdyno takes that change as never made. After each cut,
`pgdyno rollback` drops the torn record with one log line, exits 0 and puts back every change
the whole records name; the setting of the torn record is left as it is (here the cut was made
after the fact, so the test sets it back by hand, as the user would).

The journal is cut after a real `tune --apply --dsn --layers postgresql` of a sandbox of this
module's own, reached only through --dsn. No host setting is changed or read back, so the
sweep runs beside the rest of the suite (tests/parallel.py): the advice rests on the host's
RAM, CPUs and disk, which no test changes, and the host journal's sweep, which does change
sysctls, is tests/faults/test_journal_cuts.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg

from conftest import Cli
from pgdyno.postgres.cluster import Sandbox

PG_JOURNAL = "pg-journal.jsonl"


def pg_state(box: Sandbox) -> dict[str, Any]:
    with psycopg.connect(box.conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT name, setting, source FROM pg_settings").fetchall()
    return {"settings": {r[0]: r[1:] for r in rows},
            "auto_conf": (box.data_dir / "postgresql.auto.conf").read_text()}  # fmt: skip


STRIDE = 8


def cuts(length: int) -> list[int]:
    """The cut points swept end to end: both ends of the record and every STRIDE-th byte.

    Every byte is swept through the journal's real reader in tests/unit/test_pg_journal.py
    (`test_a_torn_tail_is_never_completed_so_it_is_dropped`): a tail without its newline is
    dropped whatever its bytes, which is the only thing the cut decides. Here a real
    `rollback` then restores what the whole records name; one `tune --apply` per cut made the
    every-byte sweep 4 minutes of the suite for the same proof.

    >>> cuts(20)
    [1, 9, 17, 19]
    """
    return sorted({*range(1, length, STRIDE), length - 1})


def test_pg_journal_cut_across_its_last_record(
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
