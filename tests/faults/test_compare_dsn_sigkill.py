"""SIGKILL of `pgdyno compare --dsn` while a set's ALTER SYSTEM changes are in effect: the
next compare refuses to start, `pgdyno rollback` puts the server back exactly as found
(pg_settings values and sources, postgresql.auto.conf), and no pgbench is left behind. A
SIGTERM instead is handled by the command itself: it restores the server on its way out.

pgdyno runs as a real process (`.venv/bin/pgdyno`); the existing server is a sandbox reached
only through --dsn, and Debian's packaged cluster as a user has it (tests/debian_cluster.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from conftest import one_clear_sentence, wait_for
from e2e.test_compare_dsn import existing, server_state
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import pid_cmdline
from pgdyno.undo.server import JOURNAL_NAME, pending_changes

PGDYNO = Path(sys.executable).parent / "pgdyno"
PLAN = """name = "kill-mid-compare-dsn"
baseline = "base"
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = 3
repeats = 3
warmup = 0
latency_log = "full"
[[set]]
name = "tuned"
[set.pg]
work_mem = "8MB"
jit = false
[[set]]
name = "base"
"""


def pgbench_in(workdir: Path) -> list[int]:
    """pids of pgbench whose command line names the work directory (its log prefix)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if cmd and Path(cmd[0]).name == "pgbench" and any(str(workdir) in c for c in cmd):
                found.append(int(entry.name))
    return found


__all__ = ["existing"]  # the fixture: the sandbox by --dsn, then Debian's cluster


def changed_by_journal(workdir: Path, box: Sandbox) -> bool:
    """The journal holds a change record and postgresql.auto.conf already holds the value."""
    journal = workdir / JOURNAL_NAME
    return (
        journal.exists()
        and '"op": "change"' in journal.read_text()
        and "work_mem = '8MB'" in (box.data_dir / "postgresql.auto.conf").read_text()
    )


def test_sigkill_mid_compare_dsn_then_rollback_restores_the_server(
    workdir: Path, existing: Sandbox, run_cli
):
    server = existing
    before = server_state(server)
    plan = workdir / "kill.toml"
    plan.write_text(PLAN)
    dsn = server.conninfo()
    child = subprocess.Popen(
        [str(PGDYNO), "compare", str(plan), "--dsn", dsn, "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # Killed while a run of set "tuned" measures the changed server.
        assert wait_for(
            lambda: changed_by_journal(workdir, server) and bool(pgbench_in(workdir)), timeout=300
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert [c.name for c in pending_changes(workdir)] == ["pgdyno.changed_by", "work_mem", "jit"]
    assert "work_mem = '8MB'" in (server.data_dir / "postgresql.auto.conf").read_text()
    assert wait_for(lambda: not pgbench_in(workdir), timeout=15)

    refused = run_cli(workdir, "compare", str(plan), "--dsn", dsn)
    assert refused.code == 2
    assert "run `pgdyno rollback` first" in one_clear_sentence(refused.stderr)

    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert "restored work_mem on server " in restored.stdout
    assert "restored jit on server " in restored.stdout
    assert pending_changes(workdir) == []
    # pg_reload_conf is asynchronous: the settings follow the files once it is processed.
    assert wait_for(lambda: server_state(server) == before, timeout=30)
    again = run_cli(workdir, "rollback")
    assert again.code == 0 and "nothing to restore" in again.stdout


def test_sigterm_mid_compare_dsn_restores_the_server_on_the_way_out(
    workdir: Path, existing: Sandbox
):
    server = existing
    before = server_state(server)
    plan = workdir / "term.toml"
    plan.write_text(PLAN)
    child = subprocess.Popen(
        [str(PGDYNO), "compare", str(plan), "--dsn", server.conninfo(), "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert wait_for(
            lambda: changed_by_journal(workdir, server) and bool(pgbench_in(workdir)), timeout=300
        )
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    assert child.returncode != 0 and b"Traceback" not in stderr
    assert pending_changes(workdir) == []
    assert (server.data_dir / "postgresql.auto.conf").read_text() == before[1]
    assert wait_for(lambda: server_state(server) == before, timeout=30)
