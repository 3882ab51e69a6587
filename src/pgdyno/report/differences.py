"""What differs between the groups of a report besides what they are grouped by (pure).

Comparing hosts, kernels or versions says something only when everything else is equal: the
same cell (workload, scale, clients), and the same PostgreSQL settings, pgbench version, run
length and dataset size. pg-perf-bench refuses to join runs that differ; pgdyno compares them
anyway and lists each difference, with the value each group had, for the reader to weigh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pgdyno.postgres.settings import shown_settings
from pgdyno.records.stored import StoredRun
from pgdyno.report.selection import cell_key, cell_label

# Settings that differ between servers without changing how they perform: where files and
# sockets are, names, and what the session reports in.
_PLACE_SETTINGS = frozenset({
    "application_name", "cluster_name", "config_file", "data_directory", "external_pid_file",
    "hba_file", "ident_file", "listen_addresses", "log_directory", "log_filename", "port",
    "unix_socket_directories", "client_encoding", "DateStyle", "TimeZone", "log_timezone",
    "lc_messages", "lc_monetary", "lc_numeric", "lc_time", "default_text_search_config",
})  # fmt: skip
_DATASET_TOLERANCE = 1.10  # datasets grow as runs update them: 10% apart is still "the same"

# What must be equal, by the grouping it would be the point of (skipped then).
_RUN_FACTS: tuple[tuple[str, str | None, Callable[[StoredRun], object]], ...] = (
    ("pgbench version", None, lambda r: r.pgbench_version),
    ("run length (s)", None, lambda r: r.duration_s),
    ("protocol", None, lambda r: r.protocol),
    ("pgbench threads", None, lambda r: r.jobs),
    ("PostgreSQL version", "pg_version", lambda r: r.pg_version),
    ("kernel", "kernel", lambda r: r.host.get("kernel")),
    ("CPUs", "host", lambda r: r.host.get("cpu_count")),
    ("RAM (bytes)", "host", lambda r: r.host.get("memory_bytes")),
)


def _shown(values: set[str]) -> str:
    return " / ".join(sorted(values))


def _facts_of(run: StoredRun, by: str | None) -> dict[str, str]:
    """What should be equal across groups, as text. Sets differ in settings by design, so
    grouped by set only the run itself must match."""
    if by == "set":
        return {name: str(get(run)) for name, skip, get in _RUN_FACTS if skip is None}
    facts = {name: str(get(run)) for name, skip, get in _RUN_FACTS if skip != by}
    for name, value in shown_settings(run.settings).items():  # as SHOW prints them
        if name not in _PLACE_SETTINGS:
            facts[f"setting {name}"] = value
    return facts


def _differing(
    per_group: Mapping[str, Sequence[StoredRun]], by: str | None
) -> dict[str, dict[str, str]]:
    """what -> group -> the value(s) it had, for what is not the same in every group (a
    setting a group does not list is at its default there)."""
    seen: dict[str, dict[str, set[str]]] = {}
    for group, runs in per_group.items():
        for run in runs:
            for what, value in _facts_of(run, by).items():
                seen.setdefault(what, {}).setdefault(group, set()).add(value)
    out: dict[str, dict[str, str]] = {}
    for what, by_group in seen.items():
        values = {g: _shown(by_group[g]) if g in by_group else "default" for g in per_group}
        if len(set(values.values())) > 1:
            out[what] = values
    return out


def _dataset_sizes(per_group: Mapping[str, Sequence[StoredRun]]) -> dict[str, str] | None:
    sizes = {g: [r.dataset_bytes for r in runs if r.dataset_bytes] for g, runs in per_group.items()}
    medians = {g: sorted(v)[len(v) // 2] for g, v in sizes.items() if v}
    if len(medians) < 2 or max(medians.values()) <= _DATASET_TOLERANCE * min(medians.values()):
        return None
    return {g: f"{size / 1024**2:,.0f} MiB" for g, size in medians.items()}


def differences(
    runs: Sequence[StoredRun], groups: Mapping[int, str], by: str | None
) -> list[dict[str, Any]]:
    """Per cell that more than one group ran: what differs between the groups, and how."""
    cells: dict[tuple[str, int, int], dict[str, list[StoredRun]]] = {}
    for run in runs:
        cells.setdefault(cell_key(run), {}).setdefault(groups[run.id], []).append(run)
    found: list[dict[str, Any]] = []
    for cell in sorted(cells):
        per_group = cells[cell]
        if len(per_group) < 2:
            continue
        differing = _differing(per_group, by)
        if (sizes := _dataset_sizes(per_group)) is not None:
            differing["dataset size"] = sizes
        found += [
            {"cell": cell_label(cell), "what": what, "values": values}
            for what, values in sorted(differing.items())
        ]
    return found


def difference_notes(found: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per thing that differs, its cells counted, for the report's notes.

    >>> difference_notes([{"cell": "c1", "what": "kernel", "values": {"a": "6.1", "b": "6.8"}},
    ...                   {"cell": "c2", "what": "kernel", "values": {"a": "6.1", "b": "6.8"}}])
    ['not the same in every group (2 cells): kernel: a 6.1; b 6.8']
    """
    merged: dict[tuple[str, str], int] = {}
    for item in found:
        shown = "; ".join(f"{g} {v}" for g, v in item["values"].items())
        key = (item["what"], shown)
        merged[key] = merged.get(key, 0) + 1
    return [
        f"not the same in every group ({n} cell{'s' if n != 1 else ''}): {what}: {shown}"
        for (what, shown), n in merged.items()
    ]
