"""What a killed pgdyno may leave behind, seen from outside: the processes of a work directory
(tests/faults/test_sigkill.py, tests/e2e/test_tpcc.py)."""

from __future__ import annotations

from pathlib import Path

from pgdyno.process import pid_cmdline


def processes_in(workdir: Path, program: str) -> list[int]:
    """pids of `program` (pgbench, postgres) whose command line names the work directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if cmd and Path(cmd[0]).name == program and any(str(workdir) in c for c in cmd):
                found.append(int(entry.name))
    return found


def watchdogs_of(workdir: Path) -> list[int]:
    """pids of sandbox watchdogs (postgres/watchdog.py) watching a cluster of the work dir."""
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and "pgdyno.postgres.watchdog" in (cmd := pid_cmdline(int(entry.name)))
        and any(str(workdir) in c for c in cmd)
    ]
