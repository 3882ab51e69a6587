"""What the --ssh and fleet tests check on the 'remote' hosts (this machine seen through
sshd): what the agent may leave, the pgbench it starts, a setting a plan changes, and pgdyno
run as a process that something interrupts."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from conftest import PGDYNO, wait_for
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.process import pid_cmdline
from sshd import ClientHome

# The changed set first, so that it is applied as soon as the plan starts (seed 3 of the
# balanced orders starts with the first set; the plan's seed holds on every host).
PLAN = """\
name = "over-ssh"
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = {duration}
repeats = 1
seed = 3
[[set]]
name = "wm"
[set.pg]
work_mem = "7777kB"
[[set]]
name = "base"
"""
CHANGED = "7777kB"  # SHOW work_mem while the first set is applied


def agent_dirs() -> set[str]:
    """The agents' temporary directories on the 'remote' hosts (this machine's /tmp)."""
    return {p.name for p in Path("/tmp").glob("pgdyno.*")}


def remote_pgbench(*paths: str) -> list[int]:
    """pids of pgbench runs started by an agent (their log goes to its directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if cmd and cmd[0] in paths and any("/pgdyno." in c for c in cmd):
                found.append(int(entry.name))
    return found


def work_mem(box: Sandbox) -> str:
    with connect(box.conninfo()) as client:
        return str(client.rows("SHOW work_mem")[0][0])


def measuring(boxes: Iterable[Sandbox]) -> bool:
    """The first set applied and pgbench connected to the benchmark database on every server:
    a run is under way there (between the set and the run lie the dataset and the busy check,
    where an interruption leaves no run to store)."""
    for box in boxes:
        with connect(box.conninfo()) as client:
            (row,) = client.rows(
                "SELECT current_setting('work_mem'), count(*) FROM pg_stat_activity"
                " WHERE application_name = 'pgbench' AND datname = %(db)s",
                {"db": BENCH_DB},
            )
        if row[0] != CHANGED or row[1] == 0:
            return False
    return True


def interrupted(
    home: ClientHome, args: list[str], until: Callable[[], object], act: Callable[[int], None]
) -> subprocess.CompletedProcess[str]:
    """`pgdyno ARGS` with HOME at `home`; once `until()` holds, `act(pid)` (a signal, a cut
    connection); its exit status and output once it ended (killed if the test fails)."""
    proc = subprocess.Popen(
        [str(PGDYNO), *args], env={**os.environ, "HOME": str(home.home)},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert wait_for(until, 120), f"never came: {until.__doc__ or until}"
        act(proc.pid)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
