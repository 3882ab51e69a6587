"""Rich tables for the terminal. Pure: they build renderables from records and rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from pgdyno.postgres.binaries import Available
from pgdyno.postgres.cluster import Status
from pgdyno.records import RunRecord


def fmt(value: float | None, digits: int = 1) -> str:
    """
    >>> fmt(1234.567), fmt(None), fmt(0.01234, 3)
    ('1,234.6', '-', '0.012')
    """
    return "-" if value is None else f"{value:,.{digits}f}"


def results_table(records: Sequence[tuple[int, RunRecord]]) -> Table:
    table = Table(title="pgbench results", title_justify="left")
    for name in ("run", "workload", "scale", "clients", "jobs", "repeat", "TPS", "lat avg ms",
                 "lat stddev ms", "failed", "status"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("workload", "status") else "right")
    for run_id, rec in records:
        s = rec.summary
        table.add_row(
            str(run_id), rec.cell.workload, str(rec.cell.scale), str(rec.cell.clients),
            str(rec.cell.jobs), str(rec.cell.repeat), fmt(s.tps if s else None),
            fmt(s.latency_avg_ms if s else None, 3), fmt(s.latency_stddev_ms if s else None, 3),
            str(s.failed_transactions) if s else "-",
            rec.status if rec.status == "ok" else f"[red]{rec.status}[/red]",
        )  # fmt: skip
    return table


def runs_table(rows: Sequence[dict[str, Any]]) -> Table:
    table = Table(title="runs (newest first)", title_justify="left")
    for name in ("id", "session", "finished", "workload", "scale", "clients", "TPS",
                 "lat avg ms", "PostgreSQL", "status"):  # fmt: skip
        table.add_column(name)
    for row in rows:
        table.add_row(
            str(row["id"]), str(row["session_id"]), row["finished_at"][:19].replace("T", " "),
            row["workload"], str(row["scale"]), str(row["clients"]), fmt(row["tps"]),
            fmt(row["latency_avg_ms"], 3), row["pg_version"], row["status"],
        )  # fmt: skip
    return table


def run_detail(run: dict[str, Any]) -> list[Table]:
    info = Table(title=f"run {run['id']}", title_justify="left", show_header=False)
    info.add_column("field", style="bold")
    info.add_column("value")
    host = run["host"]
    rows = [
        ("status", run["status"] + (f": {run['error']}" if run.get("error") else "")),
        ("target", run["target"]),
        ("started / finished", f"{run['started_at']} / {run['finished_at']}"),
        ("workload", f"{run['workload']}, scale {run['scale']}, {run['clients']} clients, "
                     f"{run['jobs']} jobs, {run['duration_s']} s, protocol {run['protocol']}"),
        ("TPS", fmt(run["tps"])),
        ("latency avg / stddev ms", f"{fmt(run['latency_avg_ms'], 3)} / "
                                    f"{fmt(run['latency_stddev_ms'], 3)}"),
        ("transactions / failed", f"{run['transactions']} / {run['failed_transactions']}"),
        ("dataset", f"{(run['dataset_bytes'] or 0) / 1024**2:,.0f} MiB"),
        ("PostgreSQL / pgbench", f"{run['pg_version']} / {run['pgbench_version']}"),
        ("host", f"{host['kernel']}, {host['cpu_model']} x{host['cpu_count']}, "
                 f"{host['memory_bytes'] / 1024**3:.1f} GiB"),
        ("pgbench", " ".join(run["pgbench_argv"])),
        ("settings", ", ".join(f"{k}={v}" for k, v in sorted(run["settings"].items()))),
    ]  # fmt: skip
    for name, value in rows:
        info.add_row(name, value)
    tables = [info]
    if run["statements"]:
        st = Table(title="per-statement latency (pgbench -r)", title_justify="left")
        for name in ("script", "ms", "failures", "statement"):
            st.add_column(name, justify="left" if name == "statement" else "right")
        for row in run["statements"]:
            failures = row["failures"]
            st.add_row(
                str(row["script"]), fmt(row["latency_ms"], 3),
                "-" if failures is None else str(failures), row["command"],
            )  # fmt: skip
        tables.append(st)
    if run["seconds"]:
        sec = Table(title="per second (pgbench aggregated log)", title_justify="left")
        for name in ("s", "TPS", "lat avg ms", "lat max ms", "failures"):
            sec.add_column(name, justify="right")
        t0 = run["seconds"][0]["t"]
        for row in run["seconds"]:
            sec.add_row(
                str(row["t"] - t0), fmt(row["tps"]), fmt(row["latency_avg_ms"], 3),
                fmt(row["latency_max_ms"], 3), str(row["failures"]),
            )  # fmt: skip
        tables.append(sec)
    return tables


def versions_table(rows: Sequence[Available]) -> Table:
    table = Table(title="PostgreSQL versions", title_justify="left")
    for name in ("major", "version", "source", "bin dir"):
        table.add_column(name)
    for row in rows:
        table.add_row(str(row.major), row.version or "-", row.source, str(row.bin_dir or "-"))
    return table


def sandbox_table(rows: Sequence[Status]) -> Table:
    table = Table(title="sandbox clusters", title_justify="left")
    for name in ("name", "version", "state", "pid", "port", "socket dir", "data dir"):
        table.add_column(name)
    for row in rows:
        table.add_row(
            row.name, row.version, "running" if row.running else "stopped",
            str(row.pid or "-"), str(row.port), str(row.socket_dir), str(row.data_dir),
        )  # fmt: skip
    return table
