"""OS sampler: /proc parsers, a snapshot reader, and per-second rates between two snapshots.

Parsers are pure functions of file text; `ProcReader` (and `read_snapshot`, one snapshot) is the
only code that reads files, and parses only what the metrics use.
The metrics' names, labels and units are listed in data/metrics.toml (pgdyno.catalogs.metrics).
`os_sample` uses the definitions of sysstat's `iostat -x` (12.x) and procps' `vmstat`, over
the interval T = `cur.at - prev.at` seconds. A counter that went backwards (a 32-bit field
that wrapped on an old kernel, a device that was re-attached) gives a delta of 0.

CPU, as `iostat -c` (iostat.c, write_plain_cpu_stat): deltas of the "cpu" line of /proc/stat
divided by their sum user+nice+system+idle+iowait+irq+softirq+steal. guest and guest_nice are
already inside user and nice, so they are not added again.
  cpu.user_pct    user (guest time included)     cpu.nice_pct    nice
  cpu.system_pct  system + irq + softirq ("time spent in system mode also includes time spent
                  servicing hard and soft interrupts"; vmstat's `sy` is the same sum, while
                  `mpstat` shows %irq and %soft apart)
  cpu.iowait_pct, cpu.steal_pct, cpu.idle_pct    one field each.
vmstat's `us` is user + nice; here nice stays apart, as in iostat.

Disks, as `iostat -x` (write_ext_stat). Sectors are 512 bytes whatever the device's block
size; kB = 1024 bytes, as iostat prints by default; MB = 1024 kB, as `iostat -m`.
  r_iops = Δreads / T              read_kbps = Δsectors_read / 2 / T     read_mbps = kbps / 1024
  r_await_ms = Δread_ms / Δreads   rareq_sz_kb = Δsectors_read / 2 / Δreads   (0 without reads)
  aqu_sz = Δweighted_io_ms / (1000 T)        util_pct = 100 Δio_ms / (1000 T)
and the same for writes. Discards and flushes are left out of the write columns, as iostat does.

Memory, from /proc/meminfo, in MiB (1 MB = 1048576 bytes here): dirty, writeback, free
(MemFree), available (MemAvailable), cached as vmstat's `cache` (Cached + SReclaimable), and
swap used (SwapTotal - SwapFree, vmstat's `swpd`).
vm: pswpin/pswpout in pages/s (vmstat's si/so show them in KiB/s); pgpgin/pgpgout in KiB/s
(the kernel reports them in KiB; vmstat's bi/bo).
PSI: Δtotal µs / T as a percentage of wall time; keys are left out when a file or line is absent.
The system-wide cpu "full" line is not reported (the kernel defines it only for cgroups).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from pgdyno.catalogs.metrics import fields_of
from pgdyno.errors import ParseError
from pgdyno.host.machine import parse_meminfo

MIB = 1024 * 1024
IGNORED_DEVICE_PREFIXES = ("ram", "loop")


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """Clock ticks (USER_HZ) of the "cpu" line of /proc/stat; guest time is inside user/nice."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int


@dataclass(frozen=True, slots=True)
class ProcStat:
    cpu: CpuTimes
    ctxt: int
    procs_running: int
    procs_blocked: int


@dataclass(frozen=True, slots=True)
class DiskStats:
    """One line of /proc/diskstats; discard (4.18+) and flush (5.5+) fields are None when absent."""

    name: str
    major: int
    minor: int
    reads: int
    reads_merged: int
    sectors_read: int
    read_ms: int
    writes: int
    writes_merged: int
    sectors_written: int
    write_ms: int
    in_flight: int
    io_ms: int
    weighted_io_ms: int
    discards: int | None = None
    discards_merged: int | None = None
    sectors_discarded: int | None = None
    discard_ms: int | None = None
    flushes: int | None = None
    flush_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Pressure:
    """Cumulative stall time of a /proc/pressure file, in microseconds."""

    some_total_us: int
    full_total_us: int | None


@dataclass(frozen=True, slots=True)
class ProcSnapshot:
    at: float  # seconds from a monotonic clock
    stat: ProcStat
    disks: dict[str, DiskStats]
    meminfo: dict[str, int]  # bytes
    vmstat: dict[str, int]
    pressure: dict[str, Pressure]  # "cpu" / "io" / "memory"; empty without /proc/pressure


def _ints(values: Sequence[str], file: str, number: int, line: str) -> list[int]:
    try:
        return [int(value) for value in values]
    except ValueError:
        raise ParseError(
            f"{file} line {number} is not a list of counters ({line.strip()[:60]!r}); "
            "is this a Linux /proc?"
        ) from None


_STAT_KEYS = frozenset(("cpu", "ctxt", "procs_running", "procs_blocked"))


def parse_stat(text: str) -> ProcStat:
    """/proc/stat -> the system-wide CPU ticks, context switches and process counts.

    >>> text = "cpu  10 1 5 80 2 0 1 1 0 0\\nctxt 99\\nprocs_running 2\\nprocs_blocked 0\\n"
    >>> parse_stat(text).cpu
    CpuTimes(user=10, nice=1, system=5, idle=80, iowait=2, irq=0, softirq=1, steal=1)
    """
    cpu: CpuTimes | None = None
    single: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        key = line.partition(" ")[0]
        if key not in _STAT_KEYS:
            continue  # per-CPU lines, and "intr" with a counter per interrupt: not split
        parts = line.split()
        if key == "cpu":
            values = _ints(parts[1:], "/proc/stat", number, line)
            if len(values) < 4:
                raise ParseError(f"/proc/stat line {number} has too few CPU fields.")
            cpu = CpuTimes(*(values + [0] * 8)[:8])
        elif key in ("ctxt", "procs_running", "procs_blocked"):
            values = _ints(parts[1:], "/proc/stat", number, line)
            if len(values) != 1:
                raise ParseError(f"/proc/stat line {number} ({key}) should hold one number.")
            single[key] = values[0]
    missing = [key for key in ("ctxt", "procs_running", "procs_blocked") if key not in single]
    if cpu is None or missing:
        raise ParseError(f"/proc/stat lacks {'the cpu line' if cpu is None else missing[0]}.")
    return ProcStat(cpu, single["ctxt"], single["procs_running"], single["procs_blocked"])


def parse_diskstats(text: str, wanted: Callable[[str], bool] | None = None) -> dict[str, DiskStats]:
    """/proc/diskstats -> counters per device name (11 fields, 15 with discards, 17 with flushes);
    only the devices `wanted` says yes to, when given.

    >>> disks = parse_diskstats(" 254 0 vda 5 0 40 3 7 1 56 9 0 10 12\\n")
    >>> disks["vda"].sectors_written, disks["vda"].flushes
    (56, None)
    """
    disks: dict[str, DiskStats] = {}
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or (wanted is not None and len(parts) > 2 and not wanted(parts[2])):
            continue
        if len(parts) < 14:
            raise ParseError(
                f"/proc/diskstats line {number} has {len(parts)} fields, fewer than the 14 "
                "of any kernel pgdyno supports."
            )
        major, minor = _ints(parts[:2], "/proc/diskstats", number, line)
        counters: list[int | None] = list(_ints(parts[3:20], "/proc/diskstats", number, line))
        if len(counters) < 15:
            counters = counters[:11]
        counters += [None] * (17 - len(counters))
        base = [value or 0 for value in counters[:11]]
        disks[parts[2]] = DiskStats(parts[2], major, minor, *base, *counters[11:17])
    return disks


def parse_vmstat(text: str, names: Collection[str] | None = None) -> dict[str, int]:
    """/proc/vmstat -> counter per name (only `names`, when given: the file has ~200).

    >>> parse_vmstat("pgpgin 12\\npswpout 0\\n")
    {'pgpgin': 12, 'pswpout': 0}
    >>> parse_vmstat("pgpgin 12\\nnr_foo 3\\n", ["nr_foo"])
    {'nr_foo': 3}
    """
    values: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if names is not None and line.partition(" ")[0] not in names:
            continue
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise ParseError(f"/proc/vmstat line {number} is not 'name value' ({line[:60]!r}).")
        values[parts[0]] = _ints(parts[1:], "/proc/vmstat", number, line)[0]
    return values


def parse_pressure(text: str) -> Pressure:
    """A /proc/pressure file -> the `total=` counters of its "some" and "full" lines.

    >>> parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=1500\\n")
    Pressure(some_total_us=1500, full_total_us=None)
    """
    totals: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        fields_ = dict(part.partition("=")[::2] for part in parts[1:])
        if parts[0] not in ("some", "full") or "total" not in fields_:
            raise ParseError(
                f"/proc/pressure line {number} is not a 'some'/'full' line with a total "
                f"({line[:60]!r})."
            )
        totals[parts[0]] = _ints([fields_["total"]], "/proc/pressure", number, line)[0]
    if "some" not in totals:
        raise ParseError("A /proc/pressure file has no 'some' line.")
    return Pressure(totals["some"], totals.get("full"))


# What the metrics use of the files with many lines (data/metrics.toml, `_memory`).
_MEMINFO_FIELDS = frozenset(
    (*(field for _, field in fields_of("/proc/meminfo")), "Cached", "SReclaimable", "SwapTotal",
     "SwapFree")
)  # fmt: skip
_VMSTAT_FIELDS = frozenset(field for _, field in fields_of("/proc/vmstat"))
_PRESSURE = ("cpu", "io", "memory")


def _meminfo(text: str, path: Path) -> dict[str, int]:
    lines = [line for line in text.splitlines() if line.partition(":")[0] in _MEMINFO_FIELDS]
    try:
        return parse_meminfo("\n".join(lines))
    except ValueError:
        raise ParseError(f"{path} holds a value that is not a number.") from None


def wanted_device(device: str, devices: Collection[str] | None) -> bool:
    """Whether a snapshot keeps this device: a named one, or (None) any but ram* and loop*."""
    if devices is None:
        return not device.startswith(IGNORED_DEVICE_PREFIXES)
    return device in devices


class ProcReader:
    """Snapshots of the counters under `proc_root`, for a sampler that takes one a second.

    Cheap by design, as it runs beside the benchmark: each file is read with plain os calls
    into one reused buffer (no Python file objects), and only what the metrics use is parsed:
    the named devices (None: all but ram* and loop*), 4 of /proc/vmstat's ~200 lines, 8 of
    /proc/meminfo's ~55. Files are opened afresh each time, so a file replaced at its path is
    followed (keeping them open would save ~1.5 µs a file, measured). Only /proc/stat is
    required; a file that is absent or cannot be read (PSI compiled in but disabled:
    EOPNOTSUPP) is left out. Not thread-safe: one per sampler.
    """

    def __init__(
        self,
        proc_root: Path,
        devices: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc_root = proc_root
        self.clock = clock
        self.devices = None if devices is None else frozenset(devices)
        self._buffer = bytearray(64 * 1024)

    def _wanted(self, device: str) -> bool:
        return wanted_device(device, self.devices)

    def read(self, name: str) -> str | None:
        """The text of the file `name` under the root now; None when absent or unreadable."""
        try:
            fd = os.open(self.proc_root / name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            while (size := os.preadv(fd, [self._buffer], 0)) == len(self._buffer):
                self._buffer = bytearray(2 * len(self._buffer))  # did not fit: read it again
        except OSError:
            return None
        finally:
            os.close(fd)
        return self._buffer[:size].decode(errors="replace")

    def snapshot(self) -> ProcSnapshot:
        return snapshot_of(self.read, self.clock(), self._wanted, self.proc_root)


# The files a snapshot reads, relative to the /proc root (a remote agent reads them too).
SNAPSHOT_FILES = ("stat", "diskstats", "meminfo", "vmstat", *(f"pressure/{k}" for k in _PRESSURE))


def snapshot_of(
    read: Callable[[str], str | None], at: float, wanted: Callable[[str], bool], shown: Path
) -> ProcSnapshot:
    """A snapshot from the texts `read` gives for SNAPSHOT_FILES (None: absent), taken at `at`
    (seconds of a monotonic clock); `shown` names the /proc root in messages."""
    stat = read("stat")
    if stat is None:
        raise ParseError(f"{shown / 'stat'} cannot be read; the OS sampler needs Linux /proc.")
    pressure: dict[str, Pressure] = {}
    for kind in _PRESSURE:
        text = read(f"pressure/{kind}")
        if text:
            pressure[kind] = parse_pressure(text)
    return ProcSnapshot(
        at=at,
        stat=parse_stat(stat),
        disks=parse_diskstats(read("diskstats") or "", wanted),
        meminfo=_meminfo(read("meminfo") or "", shown / "meminfo"),
        vmstat=parse_vmstat(read("vmstat") or "", _VMSTAT_FIELDS),
        pressure=pressure,
    )


def read_snapshot(
    proc_root: Path,
    clock: Callable[[], float] = time.monotonic,
    devices: Sequence[str] | None = None,
) -> ProcSnapshot:
    """One snapshot of the counters under `proc_root` (`ProcReader` for a series of them)."""
    return ProcReader(proc_root, devices, clock).snapshot()


def _delta(before: int | None, after: int | None) -> int:
    if before is None or after is None:
        return 0
    return max(0, after - before)


def _cpu(prev: CpuTimes, cur: CpuTimes) -> dict[str, float]:
    d = {
        field.name: _delta(getattr(prev, field.name), getattr(cur, field.name))
        for field in fields(CpuTimes)
    }
    total = sum(d.values())

    def pct(ticks: int) -> float:
        return 100.0 * ticks / total if total else 0.0

    return {
        "cpu.user_pct": pct(d["user"]),
        "cpu.nice_pct": pct(d["nice"]),
        "cpu.system_pct": pct(d["system"] + d["irq"] + d["softirq"]),
        "cpu.iowait_pct": pct(d["iowait"]),
        "cpu.steal_pct": pct(d["steal"]),
        "cpu.idle_pct": pct(d["idle"]),
    }


def _disk(name: str, prev: DiskStats, cur: DiskStats, seconds: float) -> dict[str, float]:
    reads, writes = _delta(prev.reads, cur.reads), _delta(prev.writes, cur.writes)
    read_kb = _delta(prev.sectors_read, cur.sectors_read) / 2
    write_kb = _delta(prev.sectors_written, cur.sectors_written) / 2
    read_ms, write_ms = _delta(prev.read_ms, cur.read_ms), _delta(prev.write_ms, cur.write_ms)
    prefix = f"disk.{name}."
    return {
        prefix + "r_iops": reads / seconds,
        prefix + "w_iops": writes / seconds,
        prefix + "read_kbps": read_kb / seconds,
        prefix + "write_kbps": write_kb / seconds,
        prefix + "read_mbps": read_kb / seconds / 1024,
        prefix + "write_mbps": write_kb / seconds / 1024,
        prefix + "r_await_ms": read_ms / reads if reads else 0.0,
        prefix + "w_await_ms": write_ms / writes if writes else 0.0,
        prefix + "rareq_sz_kb": read_kb / reads if reads else 0.0,
        prefix + "wareq_sz_kb": write_kb / writes if writes else 0.0,
        prefix + "aqu_sz": _delta(prev.weighted_io_ms, cur.weighted_io_ms) / (1000 * seconds),
        prefix + "util_pct": 100 * _delta(prev.io_ms, cur.io_ms) / (1000 * seconds),
    }


def _memory(meminfo: dict[str, int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, field in fields_of("/proc/meminfo"):  # Dirty, Writeback, MemFree, MemAvailable
        if field in meminfo:
            out[key] = meminfo[field] / MIB
    if "Cached" in meminfo:
        out["mem.cached_mb"] = (meminfo["Cached"] + meminfo.get("SReclaimable", 0)) / MIB
    if "SwapTotal" in meminfo and "SwapFree" in meminfo:
        out["swap.used_mb"] = max(0, meminfo["SwapTotal"] - meminfo["SwapFree"]) / MIB
    return out


def os_sample(
    prev: ProcSnapshot, cur: ProcSnapshot, devices: Sequence[str] | None = None
) -> dict[str, float]:
    """Metrics over the interval from `prev` to `cur` (definitions in the module docstring).

    `devices` None means every device in both snapshots except ram* and loop*; a named device
    missing from either snapshot is left out.
    """
    seconds = cur.at - prev.at
    if not seconds > 0:
        raise ValueError(f"snapshots must be taken in order (interval {seconds} s)")
    out = _cpu(prev.stat.cpu, cur.stat.cpu)
    out["sys.context_switches_per_s"] = _delta(prev.stat.ctxt, cur.stat.ctxt) / seconds
    out["sys.procs_running"] = float(cur.stat.procs_running)
    out["sys.procs_blocked"] = float(cur.stat.procs_blocked)
    if devices is None:
        devices = [name for name in cur.disks if not name.startswith(IGNORED_DEVICE_PREFIXES)]
    for name in devices:
        if name in prev.disks and name in cur.disks:
            out.update(_disk(name, prev.disks[name], cur.disks[name], seconds))
    out.update(_memory(cur.meminfo))
    for key, field in fields_of("/proc/vmstat"):  # pswpin, pswpout, pgpgin, pgpgout
        if field in prev.vmstat and field in cur.vmstat:
            out[key] = _delta(prev.vmstat[field], cur.vmstat[field]) / seconds
    for kind, line in (
        ("cpu", "some"),
        ("io", "some"),
        ("io", "full"),
        ("memory", "some"),
        ("memory", "full"),
    ):
        if kind in prev.pressure and kind in cur.pressure:
            before, after = (
                (p.some_total_us if line == "some" else p.full_total_us)
                for p in (prev.pressure[kind], cur.pressure[kind])
            )
            if before is not None and after is not None:
                out[f"psi.{kind}.{line}_pct"] = 100 * _delta(before, after) / (seconds * 1e6)
    return out
