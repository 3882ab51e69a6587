"""The crash-point sweep: a real pgdyno killed at every journal write, then `pgdyno rollback`.

Storage engines test recovery this way: the process is killed at each point where its durable
record and the world can disagree. pgdyno's points are its journal writes (pgdyno.undo.journal): a
record comes before its change, so a SIGKILL right *after* write N falls between record N and
its change, and one right *before* write N between change N-1 and record N.
`PGDYNO_CRASH_AT=after:N` makes the journal module send itself SIGKILL there.

Swept here, as root (host settings are changed): `tune --sandbox --apply --yes` (host, THP,
block device, huge pages and PostgreSQL, with restarts), and a `compare --dsn` set switch
(ALTER SYSTEM of two settings, a sysctl, then back). After every point, `pgdyno rollback` must
leave every sysctl, THP and block setting, every pg_settings value and source and
postgresql.auto.conf exactly as before. The number of points is printed (`-s` shows it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import IS_ROOT, make_env
from e2e.test_tune import advised_huge_pages, host_state, pg_state, seeded_host
from host_conditions import huge_pages
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.journal import CRASH_ENV

PGDYNO = Path(sys.executable).parent / "pgdyno"

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="host settings are changed as root only")


def pgdyno(
    workdir: Path, *args: str, crash_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(CRASH_ENV, None)
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    return subprocess.run(
        [str(PGDYNO), *args, "--workdir", str(workdir)], env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


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


def sweep(workdir: Path, command: tuple[str, ...], state: Any) -> tuple[int, str]:
    """Kill `command` before and after each of its journal writes, in turn, until it runs to
    its end (no write N); `pgdyno rollback --yes` after each, and the state checked. Returns
    the number of points a SIGKILL was delivered at, and what the complete run printed."""
    before = state()
    points = 0
    for n in range(1, 500):
        for when in ("before", "after"):
            point = f"{when}:{n}"
            run = pgdyno(workdir, *command, crash_at=point)
            back = pgdyno(workdir, "rollback", "--yes")
            assert back.returncode == 0, (point, back.stdout, back.stderr)
            after = state()
            assert after == before, (point, _diff(before, after), back.stdout, back.stderr)
            if run.returncode == 0:  # the command had fewer writes: the sweep is complete
                assert points >= 2, run.stderr
                return points, run.stdout
            assert run.returncode == -9, (point, run.returncode, run.stderr)
            points += 1
    raise AssertionError("more than 500 journal writes")


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
    points, finished = sweep(workdir, command, state)
    done = {a["name"]: a for a in json.loads(finished)["applied"]}
    assert done["huge_pages"]["effective"] == "on", done  # the huge-page steps were swept
    print(f"tune --apply: {points} crash points, each rolled back exactly")


def test_compare_dsn_set_switch_killed_at_every_journal_write(
    workdir: Path, server: Sandbox, host_guard: dict[str, str]
) -> None:
    plan = workdir / "switch.toml"
    plan.write_text(
        'name = "switch"\nbaseline = "base"\n[matrix]\nworkloads = ["select-only"]\n'
        "scales = [1]\nclients = [1]\nduration = 1\nrepeats = 1\nwarmup = 0\n"
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
