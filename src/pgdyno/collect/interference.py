"""Interference: the CPU that processes outside the experiment took during a run, and steal.

A run's TPS moves with whatever else the machine does; on a shared 2-vCPU host another
benchmark beside the run turns a 3% repeat-to-repeat spread into 30%. So every measured run
reads the process table twice, right before the sampler starts and right after it stops
(never per second), and a pure function turns the two snapshots into an `Interference` record.

The experiment is every process descending from the given roots: pgdyno's own process (which
covers pgbench, setpriv and the sandbox's watchdog) and the server's postmaster when it runs on
this host (its backends and background workers). Descent is followed by ppid in each snapshot,
so a process counts when it descended from a root in either. Kernel threads (PF_KTHREAD) are
neither experiment nor foreign: they flush the experiment's own writes. Everything else is
foreign.

CPU time is utime + stime + cutime + cstime of /proc/<pid>/stat, in clock ticks, per process
identified by (pid, start time), so a pid reused by a new process is a new process, counted from
zero. cutime/cstime catch short-lived children reaped during the run by a foreign parent that
lives on (a compile under `make`), also through a chain of parents that exit in turn (a shell
running a script running a program): the nearest ancestor alive at the end holds the whole
chain's time. The part a process gone since the first snapshot had used before it is taken off
that ancestor again.

What this misses or gets wrong:
- a process that exits during the run when none of its ancestors of the first snapshot is
  alive at the end (a whole process tree that started and ended within the run, a double-forked
  daemon): its CPU is in nobody's counters any more, or in init's;
- a process orphaned during the run and reaped by init or a subreaper: its time before the run
  is taken off its old ancestor instead of its reaper (both are clamped at zero);
- a parent that ignores SIGCHLD gains nothing from its children: they are missed;
- an existing server on another host (`bench --dsn`): the server is not part of this machine,
  and a local server that cannot be identified (no /proc access, another pid namespace such as a
  container) counts as foreign;
- foreign processes inside the same cgroup limit cannot be told from ones outside it.

Steal: the delta of the steal column of /proc/stat's cpu line over the delta of all its columns
(time a hypervisor ran someone else while this VM wanted to run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from pgdyno.collect.procfs import parse_stat
from pgdyno.errors import ConnectionFailed, ParseError, QueryRefused
from pgdyno.postgres.client import Client
from pgdyno.postgres.inventory import connects_here
from pgdyno.postgres.server import backend_pid
from pgdyno.records.interference import Interference
from pgdyno.textsafe import escape_control

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# A run is flagged when processes outside the experiment took more than this share of the
# machine (all its CPUs over the run's wall time), in %. On 2 vCPUs, 5% is a tenth of a CPU
# taken from the server and pgbench, which moves TPS by more than the 1% practical floor of a
# verdict and is of the order of the 2-12% effects the seeds look for; the background of a quiet
# host (journald, sshd, a monitoring agent) stays well under it.
FOREIGN_CPU_MAX_PCT = 5.0
# ... or when the hypervisor stole more than this share of the CPU time, in %: the run's CPUs
# were that much slower for part of it, the same order as the effects being measured.
STEAL_MAX_PCT = 5.0
# Foreign commands listed in a flagged run, biggest first.
TOP_COMMANDS = 5
# PF_KTHREAD in the flags field of /proc/<pid>/stat (include/linux/sched.h). The same as
# "pid 2 or child of pid 2" on a host, and still right in a container's pid namespace, where
# kthreadd is not visible and pid 2 is an ordinary process.
PF_KTHREAD = 0x00200000
# /proc/<pid>/stat is one line of 52 fields, at most about 1 KiB even with 64-bit values.
STAT_MAX_BYTES = 4096

ProcessKey = tuple[int, int]  # (pid, start time): a process, even when its pid is reused later


@dataclass(frozen=True, slots=True)
class ProcessTimes:
    """What /proc/<pid>/stat says of one process for interference."""

    pid: int
    ppid: int
    comm: str  # the kernel's command name (15 characters at most)
    starttime: int  # clock ticks after boot
    ticks: int  # utime + stime + cutime + cstime
    kernel: bool  # a kernel thread

    @property
    def key(self) -> ProcessKey:
        return (self.pid, self.starttime)


@dataclass(frozen=True)
class ProcessTable:
    """Every process at one moment, and the CPU line's steal and total ticks."""

    at: float  # seconds from a monotonic clock
    processes: Mapping[int, ProcessTimes]  # by pid
    steal: int
    total: int
    busy: int = 0  # user + nice + system of the cpu line: all processes' CPU time together


def is_flagged(found: Interference, foreign_limit_pct: float = FOREIGN_CPU_MAX_PCT) -> bool:
    """More foreign CPU (than `foreign_limit_pct`, --foreign-cpu-limit) or steal than a run
    tolerates.

    >>> is_flagged(Interference(48.2, 0.0)), is_flagged(Interference(0.4, 0.0))
    (True, False)
    >>> is_flagged(Interference(8.0, 0.0), foreign_limit_pct=10)
    False
    """
    return found.foreign_cpu_pct > foreign_limit_pct or found.steal_pct > STEAL_MAX_PCT


def parse_pid_stat(text: bytes) -> ProcessTimes:
    """/proc/<pid>/stat -> its process. The command sits in parentheses and may itself hold
    spaces and parentheses, so the fields are counted from the last ')'.

    >>> line = b"42 (a (b) c) S 7 42 42 0 -1 4194560 9 0 0 0 25 4 3 1 20 0 1 0 9876 0 0"
    >>> parse_pid_stat(line)
    ProcessTimes(pid=42, ppid=7, comm='a (b) c', starttime=9876, ticks=33, kernel=False)
    """
    start, close = text.find(b"("), text.rfind(b")")
    rest = text[close + 2 :].split(None, 20)  # the fields up to starttime; the rest unsplit
    try:
        return ProcessTimes(
            pid=int(text[:start]),
            ppid=int(rest[1]),
            comm=text[start + 1 : close].decode(errors="replace"),
            starttime=int(rest[19]),
            ticks=int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]),
            kernel=bool(int(rest[6]) & PF_KTHREAD),
        )
    except (ValueError, IndexError):
        raise ParseError(
            f"a /proc/<pid>/stat line has not the kernel's layout ({text[:60]!r}); is this a "
            "Linux /proc?"
        ) from None


def read_processes(proc_root: Path, clock: Callable[[], float] = time.monotonic) -> ProcessTable:
    """Every /proc/<pid>/stat and /proc/stat's cpu line. A process that ends between the
    listing and the read is skipped. About 15 µs a process: 15 ms for 1,000 (2 vCPUs)."""
    at = clock()
    root = str(proc_root)
    processes: dict[int, ProcessTimes] = {}
    for entry in os.listdir(root):  # noqa: PTH208 (names as str: the loop is hot)
        if not entry.isdigit():
            continue
        try:  # os.open and os.read: a third faster than open() here, and this loop is hot
            fd = os.open(f"{root}/{entry}/stat", os.O_RDONLY)
        except OSError:  # gone already
            continue
        try:
            text = os.read(fd, STAT_MAX_BYTES)
        except OSError:  # gone between open and read (ESRCH)
            continue
        finally:
            os.close(fd)
        if text:
            process = parse_pid_stat(text)
            processes[process.pid] = process
    cpu = parse_stat((proc_root / "stat").read_text()).cpu
    total = sum(getattr(cpu, f.name) for f in fields(cpu))
    return ProcessTable(at, processes, cpu.steal, total, cpu.user + cpu.nice + cpu.system)


def _descendants(table: ProcessTable, roots: Iterable[int]) -> set[ProcessKey]:
    children: dict[int, list[int]] = {}
    for process in table.processes.values():
        children.setdefault(process.ppid, []).append(process.pid)
    found: set[ProcessKey] = set()
    todo = [pid for pid in roots if pid in table.processes]
    while todo:
        pid = todo.pop()
        process = table.processes[pid]
        if process.key not in found:
            found.add(process.key)
            todo.extend(children.get(pid, ()))
    return found


def _reaper(
    gone: ProcessTimes, before: ProcessTable, alive: Mapping[ProcessKey, int]
) -> ProcessKey | None:
    """The live process whose cutime/cstime took in `gone`'s ticks: its nearest ancestor (in
    the first snapshot) still alive, when each process on the way was reaped by its parent."""
    seen: set[int] = set()
    pid = gone.ppid
    while pid in before.processes and pid not in seen:
        seen.add(pid)
        ancestor = before.processes[pid]
        if ancestor.key in alive:
            return ancestor.key
        pid = ancestor.ppid
    return None


def cpu_ticks(before: ProcessTable, after: ProcessTable) -> dict[ProcessKey, int]:
    """CPU ticks of every live process over the interval, a new process from zero. A process
    gone since the first snapshot left its whole CPU time in its reaper's cutime/cstime, the
    part it had used before the interval too: that part is taken off again."""
    earlier = {p.key: p for p in before.processes.values()}
    ticks = {p.key: p.ticks - (earlier[p.key].ticks if p.key in earlier else 0)
             for p in after.processes.values()}  # fmt: skip
    for gone in earlier.values():
        if gone.key not in ticks and (reaper := _reaper(gone, before, ticks)) is not None:
            ticks[reaper] -= gone.ticks
    return {key: max(0, value) for key, value in ticks.items()}


def tree_ticks(before: ProcessTable, after: ProcessTable, root: int) -> int:
    """Clock ticks of CPU used over the interval by `root` and every process descending from
    it in either snapshot (a server's postmaster: its whole server), children it reaped
    meanwhile included through its cutime/cstime."""
    tree = _descendants(before, (root,)) | _descendants(after, (root,))
    return sum(ticks for key, ticks in cpu_ticks(before, after).items() if key in tree)


def foreign_ticks(
    before: ProcessTable, after: ProcessTable, roots: Iterable[int]
) -> dict[str, int]:
    """Clock ticks of CPU used by processes outside the experiment, summed by command."""
    roots = tuple(roots)
    experiment = _descendants(before, roots) | _descendants(after, roots)
    by_command: dict[str, int] = {}
    for key, ticks in cpu_ticks(before, after).items():
        process = after.processes[key[0]]
        if ticks and not process.kernel and key not in experiment:
            by_command[process.comm] = by_command.get(process.comm, 0) + ticks
    return by_command


def measure_interference(
    before: ProcessTable,
    after: ProcessTable,
    roots: Iterable[int],
    cpus: int,
    wall_s: float,
    hz: int = CLOCK_TICKS,
) -> Interference:
    """Foreign CPU and steal between two snapshots, flagged or not (rounded to 0.1%)."""
    capacity = cpus * wall_s * hz  # ticks the machine had

    def pct(ticks: int) -> float:
        # At most the whole machine: over a short look (the 1 s before a comparison) the ticks
        # charged between the two reads can exceed wall time x CPUs by a tick or two per CPU.
        return min(100.0, round(100.0 * ticks / capacity, 1)) if capacity > 0 else 0.0

    busy = after.busy - before.busy
    # A parent that reaps a child during the run gains the child's whole lifetime in cutime at
    # once; no process, nor all of them, can have used more than the machine did meanwhile.
    cap = busy if busy > 0 else None
    by_command = {
        command: min(ticks, cap) if cap is not None else ticks
        for command, ticks in foreign_ticks(before, after, roots).items()
    }
    ranked = sorted(by_command.items(), key=lambda item: (-item[1], item[0]))
    top = tuple(
        (escape_control(command), pct(ticks))
        for command, ticks in ranked[:TOP_COMMANDS]
        if pct(ticks) > 0
    )
    total = after.total - before.total
    steal = round(100.0 * max(0, after.steal - before.steal) / total, 1) if total > 0 else 0.0
    foreign = sum(by_command.values())
    return Interference(pct(min(foreign, cap) if cap is not None else foreign), steal, top)


def flagged_interference(
    before: ProcessTable,
    after: ProcessTable,
    roots: Iterable[int],
    cpus: int,
    wall_s: float,
    hz: int = CLOCK_TICKS,
    *,
    foreign_limit_pct: float = FOREIGN_CPU_MAX_PCT,
) -> Interference | None:
    """The run's interference when it exceeds a threshold, else None (a clean run)."""
    found = measure_interference(before, after, roots, cpus, wall_s, hz)
    return found if is_flagged(found, foreign_limit_pct) else None


def interference_now(
    proc_root: Path,
    roots: Iterable[int],
    cpus: int,
    seconds: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Interference:
    """What other processes take of the machine now: two reads of the process table
    `seconds` apart (the check before a comparison spends its budget)."""
    before = read_processes(proc_root)
    sleep(seconds)
    after = read_processes(proc_root)
    return measure_interference(before, after, roots, cpus, after.at - before.at)


def _comm(proc_root: Path, pid: int) -> str | None:
    try:
        return (proc_root / str(pid) / "comm").read_text().strip()
    except OSError:
        return None


def postmaster_of(backend_pid: int, proc_root: Path) -> int | None:
    """The postmaster a backend of a server on this host belongs to: its parent, when both are
    PostgreSQL processes here; None otherwise (another host, another pid namespace)."""
    try:
        backend = parse_pid_stat((proc_root / str(backend_pid) / "stat").read_bytes())
    except (OSError, ParseError):
        return None
    postgres = ("postgres", "postmaster")
    if _comm(proc_root, backend_pid) in postgres and _comm(proc_root, backend.ppid) in postgres:
        return backend.ppid
    return None


def server_pid(client: Client, dsn: str, proc_root: Path) -> int | None:
    """The postmaster's pid of the server `client` is connected to, when it runs on this host
    (the sandbox, or a local `--dsn` server); None when it cannot be known."""
    if not connects_here(dsn):
        return None
    try:
        backend = backend_pid(client)
    except (QueryRefused, ConnectionFailed):
        return None
    return postmaster_of(backend, proc_root)
