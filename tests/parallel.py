"""Running the suite on several workers (pytest-xdist, `make test`) without tests meeting.

Most tests only wait (on PostgreSQL, pgbench, a child process) and run side by side: each makes
its own work directory (`mkdtemp`), its sandbox searches for a port from a place of its own and
moves when a start finds it taken (postgres/cluster.py), and the tests that judge interference
make their condition themselves (tests/host_conditions.py: a hog beside the runs, or pgdyno in
a PID namespace that sees only itself), so other workers' load changes none of their verdicts.

The *exclusive* tests change host-wide state (sysctl, /sys, huge pages, transparent huge pages,
loop devices, mounts, the host journal and its lock) or read it back to prove a command left it
as it was; two of them at the same time would see each other's changes. They never run beside
each other:

- `--dist loadgroup` sends them to one worker, as one xdist group, to run in a row;
- they hold an inter-process lock on a file in /tmp from the set-up of the first of a row to the
  tear-down of the last, so that two suites run at the same time (or a plain `pytest` beside
  `make test`) keep them apart too.

The pool of huge pages is the machine's too: a test that reserves pages for a server, or starts
one outside the group that may map free reserved pages (huge_pages = try), holds
`host_conditions.huge_page_pool` meanwhile.

The Debian clusters are created one at a time (`creating_clusters`): their port is picked from
the clusters configured so far.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

EXCLUSIVE = "exclusive"  # the marker: @pytest.mark.exclusive("host") or ("cpu")
# "host" is the lock anyone changing this machine's settings by hand or by test takes
# (`flock /tmp/pgdyno-host.lock COMMAND`), so that the suite waits for them too.
LOCKS = {"host": Path("/tmp/pgdyno-host.lock"), "cpu": Path("/tmp/pgdyno-tests-cpu.lock")}
CLUSTERS = Path("/tmp/pgdyno-tests-clusters.lock")

# host: the modules whose tests change host-wide state (sysctl, THP, huge pages, filesystems,
# mounts, the host journal and pgdyno's host lock) or read it back to check that nothing changed it.
# A module whose tests change only a PostgreSQL server of their own (ALTER SYSTEM, restarts) is
# not here; its tests that read a host setting are marked by hand (e2e/test_compare_dsn.py).
# So are faults/test_sigkill.py's kills of a sandbox bench or compare (its one test with a
# sysctl set is marked by hand) and the PostgreSQL journal's cut sweep
# (faults/test_pg_journal_cuts.py: `tune --apply --dsn --layers postgresql` on its own server);
# the host journal's sweep is in the group.
# The group runs in a row, so it is the floor of the suite's wall time; xdist sends the largest
# groups out first (--loadscope-reorder, its default), so this one, the largest, starts first.
EXCLUSIVE_MODULES = {
    "tests/e2e/test_compare.py": "host",
    "tests/e2e/test_compare_dsn.py": "host",  # back in the group: a lock held across tests
    "tests/e2e/test_disk_and_versions.py": "host",  # mounts a tmpfs
    "tests/e2e/test_doctor.py": "host",
    "tests/e2e/test_storage_sets.py": "host",
    "tests/e2e/test_tune.py": "host",
    "tests/e2e/test_tune_context.py": "host",
    "tests/e2e/test_tune_memory.py": "host",
    "tests/faults/test_crash_points.py": "host",
    "tests/faults/test_disk_full.py": "host",  # mounts a tmpfs
    "tests/faults/test_journal_cuts.py": "host",
    "tests/faults/test_pending_elsewhere.py": "host",
    "tests/faults/test_sigkill_thp.py": "host",
    "tests/faults/test_tune_sigkill.py": "host",
    "tests/faults/test_workdir.py": "host",  # mounts a tmpfs, remounts it read-only
    "tests/integration/test_host_changes.py": "host",
    "tests/integration/test_storage.py": "host",
    "tests/integration/test_thp_changes.py": "host",
    "tests/integration/test_tune_files_live.py": "host",
    "tests/e2e/test_adaptive.py": "cpu",
    "tests/e2e/test_busy_host.py": "cpu",
    "tests/e2e/test_noise.py": "cpu",
    "tests/e2e/test_switching_busy.py": "cpu",
    "tests/integration/test_interference_live.py": "cpu",
}


# Modules whose tests share something no fixture holds run as one xdist group, one test after
# another on one worker. No lock: nothing outside them looks. The SSH modules look at state
# every SSH test shares (the agents' directories in /tmp, which `remote_checks.agent_dirs`
# lists: one test's live agent is another's "left behind").
SHARED_MODULES = {
    "tests/e2e/test_fleet.py": "ssh-agents",
    "tests/e2e/test_remote_host.py": "ssh-agents",
}


# The simulations: pure computation that only needs CPU, and a lot of it (test_sequential_sim
# alone is about 90 CPU-seconds). They run at nice 10 (`lowered_priority`), so that on two CPUs
# the tests that wait on a real server, pgbench or a host change, the exclusive group above all
# (the floor of the suite's wall time), are not kept waiting for a CPU by them; the simulations
# take what those leave idle.
SIMULATION_MODULES = {
    "tests/unit/test_budget_power.py",
    "tests/unit/test_capacity_sim.py",
    "tests/unit/test_carryover_sim.py",
    "tests/unit/test_interference_sim.py",
    "tests/unit/test_noise_forecast.py",
    "tests/unit/test_per_run_adjustment_sim.py",
    "tests/unit/test_plan_error_sim.py",
    "tests/unit/test_probe_covariate_sim.py",
    "tests/unit/test_sequential_sim.py",
    "tests/unit/test_switching_sim.py",
    "tests/unit/test_twins_sim.py",
}
SIMULATION_NICE = 10


def is_simulation(item: pytest.Item, root: Path) -> bool:
    module = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
    return module in SIMULATION_MODULES


@contextmanager
def lowered_priority(lower: bool) -> Iterator[None]:
    """The calling thread at nice SIMULATION_NICE meanwhile (Linux sets nice per thread: the
    test runs on the worker's main thread, and nothing it starts outlives it), then back."""
    if not lower:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, max(before, SIMULATION_NICE))
    try:
        yield
    finally:
        with contextlib.suppress(PermissionError):  # raising it back needs root, as the suite
            os.setpriority(os.PRIO_PROCESS, 0, before)


def _open(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    os.fchmod(fd, 0o666)  # whoever runs the next suite can take it too
    return fd


class GroupLock:
    """This process's hold of one exclusive group's lock, if any."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self.group: str | None = None

    def take(self, group: str | None) -> None:
        """Hold `group`'s lock (None: hold none), letting go of another group's first."""
        if group == self.group:
            return
        self.release()
        if group is not None:
            fd = _open(LOCKS[group])
            try:
                if held_by_an_ancestor(fd):  # `flock /tmp/pgdyno-host.lock pytest ...`
                    os.close(fd)
                    fd = os.open(os.devnull, os.O_RDONLY)  # a hold that holds nothing
                else:
                    fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            self._fd, self.group = fd, group

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases it
        self._fd, self.group = None, None


def _ancestors() -> set[int]:
    """This process and every process above it."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])  # the field after the state: ppid
    return found


def held_by_an_ancestor(fd: int) -> bool:
    """Whether the flock on the open file `fd` is held by a process this one runs under (as
    `flock FILE pytest` holds it): taking it again would wait forever. From /proc/locks, whose
    lines read `1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`."""
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    ancestors = _ancestors()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
            holder = int(fields[4])
            if holder in ancestors:
                return True
    return False


def exclusive_group(item: pytest.Item) -> str | None:
    """The exclusive group of a test (None: it runs beside anything)."""
    mark = item.get_closest_marker(EXCLUSIVE)
    return None if mark is None else str(mark.args[0] if mark.args else "host")


def _module_scoped(item: pytest.Item) -> bool:
    """Whether the test uses a fixture made once per module (or class): a sandbox, a wheel."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # a doctest
        return False
    return any(
        definition.scope in ("module", "class")
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


def assign_group(item: pytest.Item, root: Path) -> None:
    """Mark a test of EXCLUSIVE_MODULES exclusive; put every exclusive test (these and those
    marked by hand) in the xdist group of its exclusive group, so that they run in a row on one
    worker, a test of SHARED_MODULES in its group, and a test that shares a fixture made once
    per module in its module's group, so that
    one worker makes it once (a sandbox, the wheel). The rest go to any worker."""
    module = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
    group = EXCLUSIVE_MODULES.get(module)
    if group is not None and item.get_closest_marker(EXCLUSIVE) is None:
        item.add_marker(pytest.mark.exclusive(group))
    group = exclusive_group(item)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(f"exclusive-{group}"))
    elif module in SHARED_MODULES:
        item.add_marker(pytest.mark.xdist_group(SHARED_MODULES[module]))
    elif _module_scoped(item):
        item.add_marker(pytest.mark.xdist_group(module))


@contextmanager
def creating_clusters() -> Iterator[None]:
    """One worker at a time picks a port for and creates a Debian cluster."""
    fd = _open(CLUSTERS)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
