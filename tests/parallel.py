"""Running the suite on several workers (pytest-xdist, `make test`) without tests meeting.

Most tests only wait (on PostgreSQL, pgbench, a child process) and run side by side. A few
change host-wide state (sysctl, /sys, huge pages, transparent huge pages, loop devices, mounts,
the host journal and its lock) or judge the machine's CPU (interference, noise, adaptive
budgets): those are *exclusive*. The machine is shared as a readers-writer lock on a file in
/tmp, so that it also holds between two suites run at the same time:

- every test holds the lock shared, from its set-up to its tear-down (module and session
  fixtures are made and dropped inside some test's set-up and tear-down, so they are covered);
- an exclusive test holds it exclusively: no other test of any worker runs meanwhile. The
  worker that runs a block of exclusive tests keeps it from the first to the last of the block
  (`--dist loadgroup` sends them to one worker in a row: `pytest_collection_modifyitems`), so it
  waits for the other workers' tests once per block, not once per test;
- a turnstile (a second lock, taken by everyone on the way in) makes a waiting exclusive test
  block the tests that arrive after it, so the shared holders cannot starve it.

Run serially (plain `pytest`), the locks cost nothing and only keep a second suite out.

The other workers' clashes are handled where they are made: a sandbox's port is searched from a
place of its own per work directory and moved when a start finds it taken (postgres/ports.py),
work directories are unique (`mkdtemp`), the Debian clusters are created one at a time
(`creating_clusters`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

GATE = Path("/tmp/pgdyno-tests-gate.lock")
MACHINE = Path("/tmp/pgdyno-tests-machine.lock")
CLUSTERS = Path("/tmp/pgdyno-tests-clusters.lock")
EXCLUSIVE = "exclusive"
EXCLUSIVE_GROUP = "exclusive"  # the xdist_group of every exclusive test: one worker, in a row

# Modules whose tests all change host-wide state or need the machine to themselves (the CPU
# judged, a hog started, huge pages reserved, filesystems built, the host journal written).
EXCLUSIVE_MODULES = frozenset(
    {
        "tests/e2e/test_adaptive.py",
        "tests/e2e/test_busy_host.py",
        "tests/e2e/test_noise.py",
        "tests/e2e/test_storage_sets.py",
        "tests/e2e/test_tune.py",
        "tests/e2e/test_tune_context.py",
        "tests/e2e/test_tune_memory.py",
        "tests/faults/test_crash_points.py",
        "tests/faults/test_journal_cuts.py",
        "tests/faults/test_pending_elsewhere.py",
        "tests/faults/test_sigkill_thp.py",
        "tests/faults/test_tune_sigkill.py",
        "tests/integration/test_host_changes.py",
        "tests/integration/test_interference_live.py",
        "tests/integration/test_storage.py",
        "tests/integration/test_thp_changes.py",
        "tests/integration/test_tune_files_live.py",
    }
)


def _open(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    os.fchmod(fd, 0o666)  # whoever runs the next suite can take it too
    return fd


class MachineLock:
    """This process's hold on the machine: none, shared or exclusive."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self.exclusive = False

    def hold(self, exclusive: bool) -> None:
        if self._fd is not None and self.exclusive == exclusive:
            return
        self.release()
        gate, machine = _open(GATE), _open(MACHINE)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)  # behind whoever waits already
            fcntl.flock(machine, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except BaseException:
            os.close(machine)
            raise
        finally:
            os.close(gate)  # closing releases the turnstile
        self._fd, self.exclusive = machine, exclusive

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self.exclusive = None, False


def is_exclusive(item: pytest.Item) -> bool:
    return item.get_closest_marker(EXCLUSIVE) is not None


def mark_exclusive(items: list[pytest.Item], root: Path) -> None:
    """Mark the tests of EXCLUSIVE_MODULES exclusive, and put every exclusive test (these and
    those marked by hand) in one xdist group, so that they run in a row on one worker."""
    for item in items:
        if item.path.is_relative_to(root):
            module = item.path.relative_to(root).as_posix()
            if module in EXCLUSIVE_MODULES:
                item.add_marker(pytest.mark.exclusive)
        if is_exclusive(item):
            item.add_marker(pytest.mark.xdist_group(EXCLUSIVE_GROUP))


@contextmanager
def creating_clusters() -> Iterator[None]:
    """One worker at a time picks a port for and creates a Debian cluster."""
    fd = _open(CLUSTERS)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
