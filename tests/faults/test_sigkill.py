"""SIGKILL of pgdyno mid-bench and mid-compare: finished runs intact, host settings restored
by `pgdyno rollback`, the session and comparison then `interrupted` (with when that was found),
no pgbench or postmaster left behind, and `compare --resume` finishes the job.

pgdyno runs as a real process (`.venv/bin/pgdyno`), killed with SIGKILL after a run is stored.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import IS_ROOT, make_env, postmaster_running, wait_for
from leftovers import processes_in, watchdogs_of
from pgdyno.experiment.target import open_sandbox

PGDYNO = Path(sys.executable).parent / "pgdyno"
EXPIRE = Path("/proc/sys/vm/dirty_expire_centisecs")


def stored_runs(results: Path) -> list[dict[str, Any]]:
    """The runs as the file holds them, read without pgdyno (which would mark sessions)."""
    if not results.exists():
        return []
    try:
        with sqlite3.connect(results, timeout=5) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT id, status, tps, set_name FROM runs ORDER BY id")
            return [dict(row) for row in rows]
    except sqlite3.OperationalError:  # schema not created yet
        return []


def rows(results: Path, table: str) -> list[dict[str, Any]]:
    with sqlite3.connect(results) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY id")]


def kill_when(child: subprocess.Popen[bytes], condition, timeout: float) -> None:
    try:
        assert wait_for(condition, timeout=timeout), "the moment to kill never came"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def start(workdir: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(PGDYNO), *args, "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def test_sigkill_mid_bench(workdir: Path, run_cli):
    results = workdir / "results.sqlite"
    child = start(
        workdir, "bench", "--pg-version", "18", "-w", "select-only", "-c", "1,2,1,2,1,2", "-T", "3"
    )
    # Killed while the next pgbench runs, after at least one run is stored.
    kill_when(
        child,
        lambda: len(stored_runs(results)) >= 1 and bool(processes_in(workdir, "pgbench")),
        180,
    )
    kept = stored_runs(results)
    assert 1 <= len(kept) < 6 and all(r["status"] == "ok" and r["tps"] > 0 for r in kept)
    assert rows(results, "sessions")[0]["status"] == "running"  # what the kill left
    # pgbench dies with its parent (PR_SET_PDEATHSIG): no orphan load generator.
    assert wait_for(lambda: not processes_in(workdir, "pgbench"), timeout=15)

    # The next command that opens the store tells the truth about the session.
    listed = run_cli(workdir, "runs", "list", "--json")
    assert listed.code == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert sorted(r["id"] for r in runs) == [r["id"] for r in kept]
    assert {r["id"]: r["tps"] for r in runs} == {r["id"]: r["tps"] for r in kept}  # intact
    assert {r["session_status"] for r in runs} == {"interrupted"}
    session = rows(results, "sessions")[0]
    assert session["status"] == "interrupted" and session["found_interrupted_at"]
    assert session["finished_at"] is None  # when it really stopped is not known
    shown = run_cli(workdir, "runs", "show", str(kept[0]["id"]), "--json")
    assert json.loads(shown.stdout)["session_status"] == "interrupted"
    table = run_cli(workdir, "runs", "list")
    assert "1 (interrupted)" in table.stdout  # the session column of the table, too

    # The postmaster does not outlive pgdyno: its watchdog stops it, no other command needed.
    assert wait_for(lambda: not postmaster_running(workdir), timeout=90)
    assert wait_for(lambda: not processes_in(workdir, "postgres"), timeout=15)
    assert wait_for(lambda: not watchdogs_of(workdir), timeout=30)  # its job done, it exits
    status = run_cli(workdir, "sandbox", "status", "--json")
    assert status.code == 0 and "left running" not in status.stderr

    # ... and the lab works again, from the same dataset, with the results kept.
    again = run_cli(workdir, "bench", "--pg-version", "18", "-w", "select-only", "-T", "1")
    assert again.code == 0, again.stderr
    assert re.search(r"dataset pgbench scale \d+: reused", again.stderr), again.stderr
    assert len(stored_runs(results)) == len(kept) + 1
    statuses = [s["status"] for s in rows(results, "sessions")]
    assert statuses == ["interrupted", "done"]


@pytest.fixture
def expire_restored() -> Iterator[int]:
    """vm.dirty_expire_centisecs as it was, put back whatever the test does."""
    original = int(EXPIRE.read_text())
    try:
        yield original
    finally:
        EXPIRE.write_text(f"{original}\n")


@pytest.mark.skipif(not IS_ROOT, reason="host settings are changed as root only")
@pytest.mark.exclusive("host")  # changes a sysctl and reads it back
def test_sigkill_mid_compare(workdir: Path, run_cli, expire_restored: int):
    original = expire_restored
    changed = original + 111
    plan = workdir / "kill.toml"
    plan.write_text(
        'name = "kill-mid-compare"\n'
        "[matrix]\n"
        'workloads = ["select-only"]\nscales = ["small"]\nclients = [1]\n'
        "duration = 2\nrepeats = 2\nwarmup = 0\n"
        '[[set]]\nname = "base"\n'
        f'[[set]]\nname = "expire"\n[set.sysctl]\n"vm.dirty_expire_centisecs" = {changed}\n'
    )
    results = workdir / "results.sqlite"
    child = start(workdir, "compare", str(plan))
    # Killed while set "expire" holds the kernel setting, after the first run is stored.
    kill_when(
        child,
        lambda: len(stored_runs(results)) >= 1 and int(EXPIRE.read_text()) == changed,
        300,
    )
    kept = stored_runs(results)
    assert kept and all(r["status"] == "ok" and r["tps"] > 0 for r in kept)
    assert int(EXPIRE.read_text()) == changed  # the kill left the host changed
    assert wait_for(lambda: not processes_in(workdir, "pgbench"), timeout=15)

    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert int(EXPIRE.read_text()) == original

    listed = run_cli(workdir, "runs", "list", "--json")
    assert {r["session_status"] for r in json.loads(listed.stdout)} == {"interrupted"}
    comparison = rows(results, "comparisons")[0]
    assert comparison["status"] == "interrupted" and comparison["found_interrupted_at"]

    resumed = run_cli(workdir, "compare", str(plan), "--resume", "--json")
    assert resumed.code == 0, resumed.stderr
    after = stored_runs(results)
    assert after[: len(kept)] == kept  # the finished runs, untouched
    ok = [(r["set_name"]) for r in after if r["status"] == "ok"]
    assert sorted(ok) == ["base", "base", "expire", "expire"]
    assert rows(results, "comparisons")[0]["status"] == "done"
    assert [s["status"] for s in rows(results, "sessions")] == ["interrupted", "done"]
    assert int(EXPIRE.read_text()) == original  # restored after the set, too
    assert not postmaster_running(workdir) and not processes_in(workdir, "postgres")


def test_a_postmaster_left_without_its_watchdog_is_stopped_by_the_next_command(
    workdir: Path, cache_dir: Path, binaries, run_cli
):
    """The fallback when no watchdog ran (e.g. it could not start): `recover` at the next
    command stops a sandbox whose owning command is gone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    box.start({}, owner_pid=gone.pid)  # not this process: no watchdog is started
    try:
        assert postmaster_running(workdir) and not watchdogs_of(workdir)
        status = run_cli(workdir, "sandbox", "status", "--json")
        assert status.code == 0
        assert f"left running by an interrupted pgdyno (pid {gone.pid})" in status.stderr
        assert not postmaster_running(workdir)
    finally:
        box.stop()


def test_resume_after_an_interrupted_run_counts_consistently_and_does_not_fail(
    workdir: Path, run_cli
):
    """SIGTERM in the middle of a set's second cell (the run is stored "interrupted"), then
    `--resume`: the runs planned and already done, the "finished before" figure and the run
    counters agree, and the interrupted run, made again, is not a failure (exit 0)."""
    plan = workdir / "resume.toml"
    plan.write_text(
        'name = "resume-counts"\n[matrix]\nworkloads = ["select-only"]\nscales = [1]\n'
        "clients = [1, 2]\nduration = 3\nrepeats = 2\nwarmup = 0\n"
        '[[set]]\nname = "a"\n[[set]]\nname = "b"\n[set.pg]\nwork_mem = "8MB"\n'
    )
    results = workdir / "results.sqlite"
    child = start(workdir, "compare", str(plan))
    try:
        assert wait_for(
            lambda: len(stored_runs(results)) == 1 and processes_in(workdir, "pgbench"), 300
        ), "the second run never started"
        os.kill(child.pid, signal.SIGTERM)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    statuses = [r["status"] for r in stored_runs(results)]
    assert statuses == ["ok", "interrupted"], statuses

    resumed = run_cli(workdir, "compare", str(plan), "--resume")
    assert resumed.code == 0, resumed.stderr
    assert "8 runs planned" not in resumed.stderr
    assert "7 runs planned (1 already done)" in resumed.stderr, resumed.stderr
    assert "1 runs were finished before and not repeated" in resumed.stderr
    counters = [tuple(map(int, m)) for m in re.findall(r"\((\d+)/(\d+)\)", resumed.stderr)]
    assert counters == [(n, 8) for n in range(2, 9)], counters
    ok = [r for r in stored_runs(results) if r["status"] == "ok"]
    assert len(ok) == 8
