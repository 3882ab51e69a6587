"""Which runs a report shows and the medians it draws: statistics over runs, not layout.

Runs are grouped (by set, version or session), a cell's representative run is the repeat with
the median throughput (NOPM for the TPC-C-like workload, else TPS), and per-statement and
worst-case latencies are medians over the repeats.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pgdyno.records.stored import StoredRun
from pgdyno.report.load import ReportInput
from pgdyno.stats.analysis import CellKey

# The worst-case latencies of a run, with their labels.
WORST_COLUMNS: tuple[tuple[Callable[[StoredRun], float | None], str], ...] = (
    (lambda r: r.latency_p99_ms, "p99"),
    (lambda r: r.latency_p999_ms, "p99.9"),
    (lambda r: r.latency_max_ms, "max"),
)


def size_label(workload: str, scale: int) -> str:
    """A dataset's size as the user gave it: the TPC-C-like workload's scale is its warehouses.

    >>> size_label("select-only", 10), size_label("tpcc", 1)
    ('scale 10', '1 warehouse')
    """
    if workload == "tpcc":
        return f"{scale} warehouse{'s' if scale != 1 else ''}"
    return f"scale {scale}"


def cell_label(cell: CellKey) -> str:
    """
    >>> cell_label(("select-only", 10, 4)), cell_label(("tpcc", 2, 1))
    ('select-only, scale 10, 4 clients', 'tpcc, 2 warehouses, 1 client')
    """
    workload, scale, clients = cell
    return (
        f"{workload}, {size_label(workload, scale)}, {clients} client{'s' if clients != 1 else ''}"
    )


def cell_key(run: StoredRun) -> CellKey:
    return (run.workload, run.scale, run.clients)


def is_ok(run: StoredRun) -> bool:
    return run.status == "ok" and bool(run.tps)


def _hostname(run: StoredRun) -> str:
    return str(run.host.get("hostname") or "unknown host")


# `report --by`: what a run is grouped under, seed 000's kernels and seed 002's machines.
GROUP_BY: dict[str, Callable[[StoredRun], str]] = {
    "host": _hostname,
    "kernel": lambda r: f"kernel {r.host.get('kernel') or 'unknown'}",
    "pg_version": lambda r: f"PostgreSQL {r.pg_version}",
    "set": lambda r: r.set_name or "no set",
    "filesystem": lambda r: _filesystems(r),
}


def _filesystems(run: StoredRun) -> str:
    """The filesystems under a run's data and WAL directories, with their mount options:
    seed 001's comparison of filesystems (storage sets, docs/storage.md).

    >>> from pgdyno.records.devices import DeviceLayout, RunDevice
    >>> def dev(role, fs, options): return RunDevice(role, "/d", "loop0", None, "7:0", "/m",
    ...     "/dev/loop0", fs, options)
    >>> class Run:
    ...     devices = DeviceLayout(True, dev("data", "xfs", "rw,noatime"),
    ...                            dev("wal", "ext4", "rw,relatime"), False)
    ...     def device(self, role): return self.devices.device(role)
    >>> _filesystems(Run())  # type: ignore[arg-type]
    'data xfs (rw,noatime), WAL ext4 (rw,relatime)'
    """
    data, wal = run.device("data"), run.device("wal")
    if data is None:
        return "filesystem unknown"
    text = f"data {data.fstype} ({data.mount_options})"
    if wal is not None and (wal.major_minor, wal.fstype) != (data.major_minor, data.fstype):
        text += f", WAL {wal.fstype} ({wal.mount_options})"
    return text


def _host_groups(runs: Sequence[StoredRun]) -> dict[int, str]:
    """Each run's host by name, told apart by machine id when two hosts share a name."""
    machines: dict[str, set[str]] = {}
    for run in runs:
        machines.setdefault(_hostname(run), set()).add(str(run.host.get("machine_id") or ""))
    return {
        r.id: _hostname(r)
        if len(machines[_hostname(r)]) == 1
        else f"{_hostname(r)} (machine {str(r.host.get('machine_id') or '?')[:8]})"
        for r in runs
    }


def _asked_groups(data: ReportInput, by: str) -> tuple[list[str], str, dict[int, str]]:
    key = _host_groups(data.runs) if by == "host" else {r.id: GROUP_BY[by](r) for r in data.runs}
    names = list(dict.fromkeys(key[r.id] for r in data.runs))
    if data.comparison is not None and by == "set":
        names = [s.name for s in data.comparison.sets if s.name in names]
        return names, data.comparison.baseline, key
    return names, names[0], key


def group_runs(data: ReportInput) -> tuple[list[str], str, dict[int, str]]:
    """Group names in order, the baseline group, and each run's group.

    `--by` groups as asked (the first group met is the baseline); else a comparison groups by
    set (its baseline first as the plan says); other runs by PostgreSQL version when they
    differ, else by bench session, else all in one group.
    """
    runs = data.runs
    if data.by is not None:
        return _asked_groups(data, data.by)
    if data.comparison is not None:
        names = [s.name for s in data.comparison.sets]
        return names, data.comparison.baseline, {r.id: str(r.set_name) for r in runs}
    if len({r.pg_version for r in runs}) > 1:
        key = {r.id: f"PostgreSQL {r.pg_version}" for r in runs}
    elif len({r.session_id for r in runs}) > 1:
        key = {r.id: f"session {r.session_id}" for r in runs}
    else:
        key = {r.id: runs[0].target for r in runs}
    names = list(dict.fromkeys(key[r.id] for r in runs))
    return names, names[0], key


def throughput(run: StoredRun) -> float:
    """The figure a run is judged by: NOPM for the TPC-C-like workload, else TPS."""
    return float(run.tpcc.nopm if run.tpcc is not None else run.tps or 0)


def representative(runs: Sequence[StoredRun]) -> StoredRun:
    """The repeat with the median throughput (the lower one of an even count)."""
    ranked = sorted(runs, key=throughput)
    return ranked[(len(ranked) - 1) // 2]


def tps_panels(
    ok_runs: Sequence[StoredRun], groups: Mapping[int, str]
) -> dict[tuple[str, int], dict[tuple[str, int], list[float]]]:
    """Throughput of every run, per (workload, scale) panel and per (group, clients) in it."""
    panels: dict[tuple[str, int], dict[tuple[str, int], list[float]]] = {}
    for run in ok_runs:
        key = (run.workload, run.scale)
        panels.setdefault(key, {}).setdefault((groups[run.id], run.clients), []).append(
            throughput(run)
        )
    return panels


@dataclass(frozen=True, slots=True)
class Spread:
    """The median of some runs' values, with their range."""

    median: float
    low: float
    high: float
    n: int


def spread(values: Sequence[float]) -> Spread:
    """
    >>> spread([3.0, 1.0, 2.0, 10.0])
    Spread(median=2.5, low=1.0, high=10.0, n=4)
    """
    return Spread(statistics.median(values), min(values), max(values), len(values))


def statement_spreads(runs: Sequence[StoredRun]) -> list[tuple[int, str, Spread]]:
    """Per statement of the scripts, in (script, line) order: its line, its command, and the
    spread of its average latency over the runs."""
    per_line: dict[tuple[int, int], list[float]] = {}
    commands: dict[tuple[int, int], str] = {}
    for run in runs:
        for st in run.statements:
            key = (st.script, st.line)
            per_line.setdefault(key, []).append(float(st.latency_ms))
            commands[key] = st.command
    return [(key[1], commands[key], spread(per_line[key])) for key in sorted(per_line)]


def worst_spreads(runs: Sequence[StoredRun]) -> list[tuple[str, Spread]]:
    """Per worst-case latency column that some run has: its label and its spread."""
    out = []
    for column, label in WORST_COLUMNS:
        values = [float(v) for v in map(column, runs) if v is not None]
        if values:
            out.append((label, spread(values)))
    return out
