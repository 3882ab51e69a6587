"""The crash-point sweep: a real pgdyno killed at every journal write, then `pgdyno rollback`.

Storage engines test recovery this way: the process is killed at each point where its durable
record and the world can disagree. pgdyno's points are its journal writes (pgdyno.undo.journal): a
record comes before its change, so a SIGKILL right *after* write N falls between record N and
its change, and one right *before* write N between change N-1 and record N.
`PGDYNO_CRASH_AT=after:N` makes the journal module send itself SIGKILL there. Each pgdyno
is a process of its own, forked from a server that imported pgdyno once (tests/forked.py).

Swept here, as root (host settings are changed): `tune --sandbox --apply --yes` (host, THP,
block device, huge pages and PostgreSQL, with restarts), and a `compare --dsn` set switch
(ALTER SYSTEM of two settings, a sysctl, then back). After every point, `pgdyno rollback` must
leave every sysctl, THP and block setting, every pg_settings value and source and
postgresql.auto.conf exactly as before. The number of points is printed (`-s` shows it).

The compare is killed at every write. `tune --apply` writes about 20 records of one kind in a
row (the PostgreSQL settings that need no restart), and each of its points restarts a server,
so its writes (read back from one complete run) are grouped into runs of one kind
(`runs_of_one_kind`) and it is killed before and after every write but those strictly inside
a run (`interior_writes`), until a run ends by itself: within a run, apply journals and ALTERs
the settings one after another in one loop (pgdyno.changes.alter.alter_system), and rollback
resets them in one loop, so a kill after the k-th differs from a kill after the first or the
next-to-last only in how many times those loops ran (a kill inside the run is the "some done,
some to do" the ends already show). Every host write, pgdyno's owner marker and every write
of a kind that occurs once are runs of their own: killed at, before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import forked
from conftest import IS_ROOT, make_env, wait_for
from e2e.test_tune import advised_huge_pages, host_state, pg_state, seeded_host
from host_conditions import huge_pages
from leftovers import watchdogs_of
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.journal import CRASH_ENV

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="host settings are changed as root only")


def pgdyno(
    workdir: Path, *args: str, crash_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    """A pgdyno process (tests/forked.py: forked from a server that imported pgdyno once)."""
    env = dict(os.environ)
    env.pop(CRASH_ENV, None)
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    return forked.pgdyno([*args, "--workdir", str(workdir)], env, timeout=600)


def running_state(box: Sandbox) -> dict[str, Any]:
    stopped = box.postmaster_pid() is None
    if stopped:
        box.start({}, owner_pid=None)
    try:
        return pg_state(box)
    finally:
        if stopped:
            box.stop()


@pytest.fixture
def sandbox(workdir: Path, cache_dir: Path, binaries: Binaries) -> Iterator[Sandbox]:
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    yield box
    box.stop()


def sweep(
    workdir: Path,
    command: tuple[str, ...],
    state: Callable[[], Any],
    skip: frozenset[int] = frozenset(),
) -> tuple[int, str]:
    """Kill `command` before and after each of its journal writes but those in `skip`, in
    turn, until it runs to its end (no write N); `pgdyno rollback --yes` after each, and the
    state checked. Returns the number of points a SIGKILL was delivered at, and what the
    complete run printed."""
    before = state()
    points = 0
    for n in range(1, 500):
        if n in skip:
            continue
        for when in ("before", "after"):
            run = killed_at(workdir, command, f"{when}:{n}", state, before)
            if run.returncode == 0:  # the command had fewer writes: the sweep is complete
                assert points >= 2, run.stderr
                return points, run.stdout
            points += 1
    raise AssertionError("more than 500 journal writes")


def interior_writes(
    workdir: Path, command: tuple[str, ...], state: Callable[[], Any]
) -> tuple[frozenset[int], int]:
    """`command` run to its end once, its journal writes read back in the order they were
    made, then rolled back and the state checked: the writes (numbered from 1) strictly inside
    a run of writes of one kind, which `sweep` may skip, and the number of writes.

    A later run may write a little differently (huge pages another process took since add a
    vm.nr_hugepages write after the settings' loop; a busier clock can leave track_io_timing
    out of the advice), so `sweep` still goes on until a run ends by itself: a run shifted by
    a write still has its ends killed at, or the write next to them."""
    before = state()
    complete = killed_at(workdir, command, None, state, before, keep=True)
    assert complete.returncode == 0, complete.stderr
    writes = written(workdir)
    back = pgdyno(workdir, "rollback", "--yes")
    assert back.returncode == 0, (back.stdout, back.stderr)
    assert state() == before, _diff(before, state())
    ends = runs_of_one_kind([kind_of(journal, record) for journal, record in writes])
    return frozenset(range(1, len(writes) + 1)) - frozenset(ends), len(writes)


def killed_at(
    workdir: Path,
    command: tuple[str, ...],
    point: str | None,
    state: Callable[[], Any],
    before: Any,
    *,
    keep: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`command` killed at `point` (None: run to its end), then, unless `keep`, `pgdyno
    rollback --yes` and the state checked against `before`; the command's outcome. A command
    that ended otherwise than by the SIGKILL or a success fails the test."""
    run = pgdyno(workdir, *command, crash_at=point)
    assert run.returncode in (0, -9), (point, run.returncode, run.stderr)
    # The killed command's sandbox watchdog stops the server it left; rollback comes after, as
    # a user's would (a fork is faster than the watchdog's look at /proc).
    assert wait_for(lambda: not watchdogs_of(workdir), timeout=60), "a watchdog never ended"
    if not keep:
        back = pgdyno(workdir, "rollback", "--yes")
        assert back.returncode == 0, (point, back.stdout, back.stderr)
        after = state()
        assert after == before, (point, _diff(before, after), back.stdout, back.stderr)
    return run


JOURNALS = ("host-journal.jsonl", "pg-journal.jsonl")


def written(workdir: Path) -> list[tuple[str, dict[str, Any]]]:
    """The records of the work directory's journals, in the order they were written: each
    file in its own order, the two merged by their time stamps (milliseconds). Records of
    two journals written in the same millisecond, whose order cannot be told, come with
    `"tied": True`, so that each is a run of its own whichever came first."""
    found: list[tuple[datetime, int, str, dict[str, Any]]] = []
    for journal in JOURNALS:
        path = workdir / journal
        lines = path.read_text().splitlines() if path.exists() else []
        for i, line in enumerate(lines):
            record = json.loads(line)
            found.append((datetime.fromisoformat(record["at"]), i, journal, record))
    found.sort(key=lambda item: (item[0], JOURNALS.index(item[2]), item[1]))
    journals_at: dict[datetime, set[str]] = {}
    for at, _i, journal, _record in found:
        journals_at.setdefault(at, set()).add(journal)
    return [
        (journal, {**record, "tied": True} if len(journals_at[at]) > 1 else record)
        for at, _i, journal, record in found
    ]


def kind_of(journal: str, record: dict[str, Any]) -> Hashable:
    """What a write is, for grouping: a PostgreSQL setting's change by whether it needs a
    restart; any other write (a host or device setting, pgdyno's owner marker, a restored
    mark, a record written in the same millisecond as another journal's) is a kind of its own.

    >>> kind_of("pg-journal.jsonl", {"op": "change", "name": "work_mem", "restart": False})
    ('pg-journal.jsonl', 'change', False)
    >>> kind_of("host-journal.jsonl", {"op": "change", "id": 3, "name": "vm.swappiness"})
    ('host-journal.jsonl', 'change', 3, 'vm.swappiness')
    """
    name = str(record.get("name", ""))
    if (
        journal == "pg-journal.jsonl"
        and record.get("op") == "change"
        and not (name.startswith("pgdyno.") or record.get("tied"))
    ):
        return (journal, "change", bool(record.get("restart")))
    return (journal, record.get("op"), record.get("id"), name)


def runs_of_one_kind(kinds: Sequence[Hashable]) -> list[int]:
    """The writes (numbered from 1) that begin or end a run of consecutive writes of one kind.

    >>> runs_of_one_kind(["host", "marker", "pg", "pg", "pg", "pg", "restart"])
    [1, 2, 3, 6, 7]
    >>> runs_of_one_kind(["pg", "pg"])
    [1, 2]
    """
    ends = []
    for i, kind in enumerate(kinds):
        first = i == 0 or kinds[i - 1] != kind
        last = i == len(kinds) - 1 or kinds[i + 1] != kind
        if first or last:
            ends.append(i + 1)
    return ends


@pytest.fixture
def huge_host(workdir: Path, sandbox: Sandbox) -> Iterator[dict[str, str]]:
    """host_guard's seeded host, with the huge pages tune asks for reserved beforehand, so that
    every sweep reaches huge_pages = on (a kernel that cannot reserve them skips, visibly)."""
    advice = pgdyno(workdir, "tune", "--sandbox", "--pg-version", "18", "--json")
    assert advice.returncode == 0, advice.stderr
    with huge_pages(advised_huge_pages(advice.stdout)), seeded_host(workdir) as before:
        yield before


def test_tune_apply_killed_at_every_journal_write(
    workdir: Path, sandbox: Sandbox, huge_host: dict[str, str]
) -> None:
    def state() -> tuple[dict[str, str], dict[str, Any]]:
        pg = running_state(sandbox)
        return host_state(workdir), {**pg, "settings": _stable(pg["settings"])}

    command = ("tune", "--sandbox", "--pg-version", "18", "--apply", "--yes", "--json")
    skip, writes = interior_writes(workdir, command, state)
    points, finished = sweep(workdir, command, state, skip)
    done = {a["name"]: a for a in json.loads(finished)["applied"]}
    assert done["huge_pages"]["effective"] == "on", done  # the huge-page steps were swept
    print(
        f"tune --apply: {points} crash points (its {writes} journal writes but the "
        f"{len(skip)} inside a run of one kind), each rolled back exactly"
    )


def test_compare_dsn_set_switch_killed_at_every_journal_write(
    workdir: Path, server: Sandbox, host_guard: dict[str, str]
) -> None:
    # seed 7 runs "tuned" first: every write (its switch, then its restore) comes before the
    # base set's run, which the points would otherwise wait for (the order was drawn anew by
    # each point's compare; either way the same eight writes are made).
    plan = workdir / "switch.toml"
    plan.write_text(
        'name = "switch"\nbaseline = "base"\n[matrix]\nworkloads = ["select-only"]\n'
        "scales = [1]\nclients = [1]\nduration = 1\nrepeats = 1\nwarmup = 0\nseed = 7\n"
        '[[set]]\nname = "base"\n[[set]]\nname = "tuned"\n[set.pg]\nwork_mem = "8MB"\n'
        'jit = false\n[set.sysctl]\n"vm.swappiness" = 10\n'
    )

    def state() -> tuple[dict[str, str], dict[str, Any]]:
        pg = pg_state(server)
        return host_state(workdir), {**pg, "settings": _stable(pg["settings"])}

    command = ("compare", str(plan), "--dsn", server.conninfo(), "--data-dir",
               str(server.data_dir))  # fmt: skip
    points, _ = sweep(workdir, command, state)
    print(f"compare --dsn set switch: {points} crash points, each rolled back exactly")


def _diff(a: Any, b: Any) -> Any:
    """What differs between two states, for the failure message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _diff(a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_diff(x, y) for x, y in zip(a, b, strict=True))
    return (a, b)


# What a start found rather than what was configured (huge pages free at that moment).
_FOUND_AT_START = {"huge_pages_status"}


def _stable(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k not in _FOUND_AT_START}


@pytest.fixture
def host_guard(workdir: Path) -> Iterator[dict[str, str]]:
    with seeded_host(workdir) as before:
        yield before
