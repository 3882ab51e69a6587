"""SIGKILL to pgdyno in the middle of a sweep: finished runs stay, nothing is left behind."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from conftest import wait_for
from pgdyno.process import pid_alive, pid_cmdline


def finished_runs(results: Path) -> int:
    if not results.exists():
        return 0
    try:
        with sqlite3.connect(results, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def pgbench_pids(workdir: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if cmd and cmd[0].endswith("pgbench") and any(str(workdir) in c for c in cmd):
                pids.append(int(entry.name))
    return pids


def test_sigkill_mid_sweep_keeps_finished_runs_and_cleans_up(workdir: Path, run_cli):
    results = workdir / "results.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-m", "pgdyno", "bench", "--pg-version", "18", "-w", "select-only",
         "-c", "1,2,1,2,1,2", "-T", "3", "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert wait_for(lambda: finished_runs(results) >= 2, timeout=180), "no runs finished"
        # Kill while the next pgbench is running.
        assert wait_for(lambda: bool(pgbench_pids(workdir)), timeout=30)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    kept = finished_runs(results)
    assert 2 <= kept < 6
    # pgbench dies with its parent (PR_SET_PDEATHSIG): no orphan load generator.
    assert wait_for(lambda: not pgbench_pids(workdir), timeout=15)

    # The postmaster outlived pgdyno; the next command finds it and stops it.
    status = run_cli(workdir, "sandbox", "status", "--json")
    assert status.code == 0
    assert "left running by an interrupted pgdyno" in status.stderr
    assert '"running": false' in status.stdout
    pid_file = workdir / "clusters" / "pg18" / "data" / "postmaster.pid"
    assert not pid_file.exists() or not pid_alive(int(pid_file.read_text().split()[0]))

    # ... and the lab works again, from the same dataset, with the results kept.
    again = run_cli(workdir, "bench", "--pg-version", "18", "-w", "select-only", "-T", "1")
    assert again.code == 0, again.stderr
    assert "reused" in again.stdout
    assert finished_runs(results) == kept + 1
    with sqlite3.connect(results) as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM sessions ORDER BY id")]
    assert statuses == ["interrupted", "done"]  # the killed session, closed by the next one
