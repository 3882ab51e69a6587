"""A watchdog that stops a sandbox whose pgdyno command did not live to stop it.

A command that starts the sandbox for itself (its *owner*) stops it on every exit it sees:
normal end, error, Ctrl-C, SIGTERM. A SIGKILL or the OOM killer gives it no chance, and the
postmaster (a daemon) would stay up until the next command's `recover`. So beside it the owner
starts this small process, tied to it by a pipe: the kernel closes the pipe when the owner
exits, however it exits. The watchdog then waits for the owner to be gone and, if the cluster
still names it as owner, stops the postmaster (fast shutdown). An owner that stops the sandbox
itself clears the owner first and closes the pipe; the watchdog then finds nothing to do.

Run as `python -m pgdyno.postgres.watchdog CLUSTER_ROOT OWNER_PID OWNER_START_TICKS`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pgdyno import process
from pgdyno.errors import PgdynoError
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.sandbox_user import sandbox_user

# How long the owner may take to vanish from /proc after its pipe closed (exit closes files
# before the process becomes a zombie).
OWNER_EXIT_WAIT_S = 10.0


def _owner_gone(pid: int, started: int | None) -> bool:
    deadline = time.monotonic() + OWNER_EXIT_WAIT_S
    while process.same_process(pid, started):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def watch(root: Path, pid: int, started: int | None) -> int:
    """Block until the owner's pipe (stdin) closes; then stop the sandbox if it was left."""
    sys.stdin.buffer.read()  # returns at end of file: the owner closed it or died
    box = Sandbox(root, sandbox_user(os.geteuid() == 0, create=False))
    try:
        if not _still_owned(box, pid, started) or not _owner_gone(pid, started):
            return 0  # stopped by its owner, or the owner closed the pipe on purpose
        if _still_owned(box, pid, started):
            box.stop()
    except PgdynoError:
        return 1  # nobody to report to: the next command's `recover` tries again
    return 0


def _still_owned(box: Sandbox, pid: int, started: int | None) -> bool:
    state = box.state()
    return (state.owner_pid, state.owner_started) == (pid, started)


def main(argv: Sequence[str]) -> int:
    # Ctrl-C in the terminal is the owner's to handle; the watchdog has its own session anyway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    root, pid, started = argv
    return watch(Path(root), int(pid), int(started) if started.isdigit() else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
