"""`kill -9` of the sandbox postmaster while pgbench runs.

Before: the run was stored with pgbench's "Run was aborted", then pgdyno died with
`internal error (AdminShutdown ...)` from the next dataset check. Now: the run is stored as
failed because the server stopped (naming its log), the sweep stops with one sentence (exit 1),
the finished runs stay, the session is `failed`, and nothing of the sandbox is left running.

pgdyno runs as a real process (`.venv/bin/pgdyno`), so the postmaster can be killed under it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from conftest import one_clear_sentence, pgdyno_process, wait_for
from pgdyno.process import pid_alive, pid_cmdline


def stored(results: Path) -> list[tuple[int, str]]:
    """(id, status) of the stored runs, read without pgdyno."""
    if not results.exists():
        return []
    try:
        with sqlite3.connect(results, timeout=5) as db:
            return list(db.execute("SELECT id, status FROM runs ORDER BY id"))
    except sqlite3.OperationalError:  # schema not created yet
        return []


def measured_pgbench(workdir: Path) -> int | None:
    """The pid of a measuring pgbench (-T, not -i) of this work directory."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if cmd and cmd[0].endswith("pgbench") and "-T" in cmd and str(workdir) in str(cmd):
                return int(entry.name)
    return None


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def left_running(workdir: Path, pids: list[int]) -> list[int]:
    """Any of `pids`, or any process whose command line names the work directory, alive."""
    named = [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and any(str(workdir) in part for part in pid_cmdline(int(e.name)))
    ]
    return [pid for pid in {*pids, *named} if pid_alive(pid) and pid != os.getpid()]


@pytest.mark.slow
def test_postmaster_sigkill_mid_run_ends_the_sweep_with_one_sentence(workdir: Path, run_cli):
    results = workdir / "results.sqlite"
    postmaster_pid = workdir / "clusters" / "pg18" / "data" / "postmaster.pid"
    with pgdyno_process(
        "bench", "--pg-version", "18", "-w", "tpcb-like", "-s", "1", "-c", "2", "-T", "4",
        "--repeats", "4", "--workdir", str(workdir),
    ) as bench:  # fmt: skip
        assert wait_for(lambda: len(stored(results)) >= 1, timeout=240), "no run finished"
        assert wait_for(lambda: measured_pgbench(workdir) is not None, timeout=60)
        postmaster = int(postmaster_pid.read_text().split()[0])
        server = [postmaster, *children(postmaster)]
        os.kill(postmaster, signal.SIGKILL)
        _, stderr = bench.communicate(timeout=240)

    assert bench.returncode == 1, stderr
    sentence = one_clear_sentence(stderr).removeprefix("pgdyno: error: ")
    log = workdir / "clusters" / "pg18" / "log" / "postgresql.log"
    assert sentence.startswith("the sweep stopped at run ")
    assert f"the PostgreSQL server stopped during the run (see its log: {log}" in sentence
    assert "are saved in the results database (session 1)" in sentence

    listed = run_cli(workdir, "runs", "list", "--json")
    assert listed.code == 0, listed.stderr
    runs = sorted(json.loads(listed.stdout), key=lambda r: r["id"])
    statuses = [r["status"] for r in runs]
    assert statuses[-1] == "failed" and set(statuses[:-1]) == {"ok"} and len(statuses) >= 2
    assert runs[-1]["error"].startswith(
        f"the PostgreSQL server stopped during the run (see its log: {log}"
    )
    assert all(r["tps"] > 0 for r in runs[:-1])  # the finished runs are intact

    with sqlite3.connect(results) as db:
        assert db.execute("SELECT status FROM sessions").fetchall() == [("failed",)]
    assert wait_for(lambda: not left_running(workdir, server), timeout=30), left_running(
        workdir, server
    )
