"""Rich tables for the terminal. Pure: they build renderables from records and rows."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from pgdyno.formatting import fmt, orders_line
from pgdyno.records import Available, Event, RunRecord, Status
from pgdyno.records.devices import RunDevice
from pgdyno.records.health import RunHealth
from pgdyno.records.stored import RunListing, StoredComparison, StoredRun
from pgdyno.terminal.tpcc_tables import tpcc_rows, tpcc_table
from pgdyno.textsafe import safe_text

# The tail of pgbench's stderr that `runs show` prints for a run that did not finish.
STDERR_TAIL_LINES = 20


def results_table(records: Sequence[tuple[int, RunRecord]]) -> Table:
    table = Table(title="pgbench results", title_justify="left")
    tpcc = any(rec.tpcc is not None for _, rec in records)
    for name in ("run", "workload", "scale", "clients", "jobs", "repeat",
                 *(("NOPM", "TPM") if tpcc else ()), "TPS", "lat avg ms", "lat stddev ms",
                 "failed", "status"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("workload", "status") else "right")
    for run_id, rec in records:
        s = rec.summary
        t = rec.tpcc
        table.add_row(
            str(run_id), rec.cell.workload, str(rec.cell.scale), str(rec.cell.clients),
            str(rec.cell.jobs), str(rec.cell.repeat),
            *((fmt(t.nopm if t else None), fmt(t.tpm if t else None)) if tpcc else ()),
            fmt(s.tps if s else None),
            fmt(s.latency_avg_ms if s else None, 3), fmt(s.latency_stddev_ms if s else None, 3),
            str(s.failed_transactions) if s else "-",
            _flagged(status_text(rec.status), rec.interference is not None),
        )  # fmt: skip
    return table


def status_text(status: str) -> Text:
    """A run's status, red unless it is ok (a Text style: data is never read as markup)."""
    return Text(status, style="" if status == "ok" else "red")


def _flagged(status: Text, interfered: bool) -> Text:
    """A run's status, marked when other processes took CPU time during it."""
    if interfered:
        status.append(" (interference)", style="yellow")
    return status


def _text(value: object) -> str:
    """
    >>> _text(None), _text(0)
    ('-', '0')
    """
    return "-" if value is None else str(value)


def comparison_head(info: StoredComparison) -> Text:
    """The comparison a listing of its runs belongs to: plan, status, and how its rounds were
    ordered (the design and seed stored with them; not said for a comparison stored before its
    rounds were kept). A Text: the plan's name is printed as written, never as markup."""
    line = f"comparison {info.id}: plan {info.name} ({info.plan_path}), {info.status}"
    if info.rounds is not None:
        line += f"; {orders_line(info.rounds.design, info.rounds.seed)}"
    return Text(safe_text(line))


def runs_table(rows: Sequence[RunListing]) -> Table:
    table = Table(title="runs (newest first)", title_justify="left")
    tpcc = any(row.tpcc is not None for row in rows)
    hosts = len({row.host for row in rows}) > 1  # a store shared by several hosts
    sets = any(row.comparison_id is not None for row in rows)
    for name in ("id", "session", *(("comparison: set",) if sets else ()),
                 *(("host",) if hosts else ()), "finished", "workload",
                 "scale", "clients", *(("NOPM",) if tpcc else ()), "TPS", "lat avg ms",
                 "PostgreSQL", "status"):  # fmt: skip
        table.add_column(name)
    for row in rows:
        nopm = (fmt(row.tpcc.nopm if row.tpcc else None),) if tpcc else ()
        host = (_text(row.host or "?"),) if hosts else ()
        belongs = (Text(safe_text(_belongs(row) or "-")),) if sets else ()
        table.add_row(
            str(row.id), _session(row), *belongs, *host, row.finished_at[:19].replace("T", " "),
            row.workload, str(row.scale), str(row.clients), *nopm, fmt(row.tps),
            fmt(row.latency_avg_ms, 3), _text(row.pg_version),
            _flagged(status_text(row.status), row.interference is not None),
        )  # fmt: skip
    return table


def _belongs(row: RunListing | StoredRun) -> str | None:
    """The comparison and set a run was made for, None for a bench's run.

    >>> from dataclasses import replace
    >>> _belongs(_listing_example()), _belongs(replace(_listing_example(), comparison_id=None))
    ('4: xfs-noatime', None)
    """
    if row.comparison_id is None:
        return None
    return f"{row.comparison_id}: {row.set_name or '?'}"


def _listing_example() -> RunListing:
    return RunListing(
        1, 2, "ok", "", "", "tpcb", 1, 1, 1, 5, "simple", None, 1, 0, None, None, None, None,
        None, None, "18.1", "18.1", None, None, None, None, None, None, None, "ok", "h",
        comparison_id=4, set_name="xfs-noatime",
    )  # fmt: skip


def _session(row: RunListing | StoredRun) -> str:
    """The session id, with its status when it did not end well (a killed pgdyno's)."""
    status = row.session_status
    if status in ("interrupted", "failed"):
        return f"{row.session_id} ({status})"
    return str(row.session_id)


def _latency_text(run: StoredRun) -> str:
    values = (run.latency_p50_ms, run.latency_p90_ms, run.latency_p99_ms, run.latency_p999_ms,
              run.latency_max_ms)  # fmt: skip
    source = f"  ({run.latency_source})" if run.latency_source else ""
    return " / ".join(fmt(v, 3) for v in values) + source


def _size(run: StoredRun) -> str:
    return f"{run.scale} warehouses" if run.tpcc is not None else f"scale {run.scale}"


def dataset_text(size_bytes: int | None, events: Sequence[Event]) -> str:
    """A run's dataset: its size, and how it was made when the run was the first on it.

    >>> dataset_text(3 << 20, [Event(1.0, "dataset_ready", {"generated": True,
    ...     "seconds": 4.2, "table_bytes": 2_100_000})])
    '3 MiB (generated in 4.2 s, 0.5 MB/s of tables)'
    >>> dataset_text(3 << 20, [])
    '3 MiB'
    """
    text = f"{(size_bytes or 0) / 1024**2:,.0f} MiB"
    made = next((e.detail for e in events if e.kind == "dataset_ready"), None)
    if made is None:
        return text
    how = "generated" if made.get("generated") else "reused"
    seconds, tables = made.get("seconds"), made.get("table_bytes")
    seconds = float(seconds) if isinstance(seconds, int | float) else 0.0
    speed = (
        f", {tables / seconds / 1e6:.1f} MB/s of tables"
        if isinstance(tables, int) and tables and seconds
        else ""
    )
    return f"{text} ({how} in {seconds:.1f} s{speed})"


def _clock_rows(events: Sequence[Event]) -> list[tuple[str, str]]:
    """A host reached over SSH: the offset its clock was corrected by, within +- half the
    round trip it was measured over.

    >>> _clock_rows([Event(1.0, "clock_offset", {"host": "db1", "offset_ms": -2.5,
    ...     "round_trip_ms": 0.8})])
    [('clock of db1', '-2.5 ms from this one (+-0.4 ms), corrected')]
    """
    found = next((e.detail for e in events if e.kind == "clock_offset"), None)
    if found is None:
        return []
    offset, trip = (float(str(found.get(k, 0))) for k in ("offset_ms", "round_trip_ms"))
    return [(f"clock of {found.get('host')}",
             f"{offset:+.1f} ms from this one (+-{trip / 2:.1f} ms), corrected")]  # fmt: skip


def _detail_rows(run: StoredRun) -> list[tuple[str, str]]:
    host = run.host_brief
    return [
        ("status", run.status),
        *([("reason", str(run.error))] if run.error else []),
        ("target", run.target),
        ("session", _session(run)),
        *([("comparison", f"{run.comparison_id}, set {_text(run.set_name)}")]
          if run.comparison_id is not None else []),
        ("started / finished", f"{run.started_at} / {run.finished_at}"),
        ("workload", f"{run.workload}, {_size(run)}, {run.clients} clients, "
                     f"{run.jobs} jobs, {run.duration_s} s after {run.warmup_s} s "
                     f"unmeasured warm-up, protocol {run.protocol}"),
        *(tpcc_rows(run.tpcc) if run.tpcc is not None else []),
        ("TPS", fmt(run.tps)),
        ("latency avg / stddev ms", f"{fmt(run.latency_avg_ms, 3)} / "
                                    f"{fmt(run.latency_stddev_ms, 3)}"),
        ("latency p50 / p90 / p99 / p99.9 / max ms", _latency_text(run)),
        ("transactions / failed",
         f"{_text(run.transactions)} / {_text(run.failed_transactions)}"),
        ("dataset", dataset_text(run.dataset_bytes, run.events)),
        ("PostgreSQL / pgbench", f"{_text(run.pg_version)} / {_text(run.pgbench_version)}"),
        ("host", f"{_text(run.host.get('hostname') or '?')}: {host.kernel}, {host.cpu_model} "
                 f"x{host.cpu_count}, {(host.memory_bytes or 0) / 1024**3:.1f} GiB"),
        ("pgbench", " ".join(run.pgbench_argv)
         or "- (pgbench failed before the measured run started)"),
        *_clock_rows(run.events),
        *_health_rows(run.health if run.health is not None and run.health.assessed else None),
        *_device_rows(run.device_list()),
        ("settings", ", ".join(f"{k}={v}" for k, v in sorted(run.settings.items()))),
    ]  # fmt: skip


def run_detail(run: StoredRun) -> list[Table]:
    info = Table(title=f"run {run.id}", title_justify="left", show_header=False)
    info.add_column("field", style="bold")
    info.add_column("value")
    for name, value in _detail_rows(run):
        info.add_row(name, value)
    tables = [info]
    if run.tpcc is not None:
        tables.append(tpcc_table(run.tpcc))
    if run.status != "ok":
        tables.append(stderr_tail(run.stderr or ""))
    if run.statements:
        st = Table(title="per-statement latency (pgbench -r)", title_justify="left")
        for name in ("script", "ms", "failures", "statement"):
            st.add_column(name, justify="left" if name == "statement" else "right")
        for row in run.statements:
            st.add_row(
                str(row.script), fmt(row.latency_ms, 3),
                "-" if row.failures is None else str(row.failures), row.command,
            )  # fmt: skip
        tables.append(st)
    return tables


def stderr_tail(stderr: str, lines: int = STDERR_TAIL_LINES) -> Table:
    """The last lines pgbench wrote on stderr, for a run that failed or was interrupted."""
    kept = stderr.rstrip("\n").splitlines()[-lines:]
    table = Table(
        title=f"pgbench's error output (last {min(lines, len(kept))} lines)" if kept
        else "pgbench's error output: empty",
        title_justify="left", show_header=False,
    )  # fmt: skip
    table.add_column("line")
    for line in kept:
        table.add_row(line)
    return table


def _health_rows(health: RunHealth | None) -> list[tuple[str, str]]:
    if health is None:
        return []
    cpu = health.client_cpu_pct
    rows = [
        ("stability", f"TPS CV {fmt(health.tps_cv_pct)}%, trend "
                      f"{fmt(health.tps_trend_pct)}% over {health.measured_s} s "
                      f"(first {health.trimmed_s} s trimmed)"),
        ("pgbench CPU", "-" if cpu is None else
         f"{cpu:.0f}% of {fmt(health.client_capacity_pct, 0)}% available"),
    ]  # fmt: skip
    rows += [("warning", w) for w in health.warnings]
    return rows


def _device_rows(devices: Sequence[RunDevice]) -> list[tuple[str, str]]:
    rows = []
    for role in ("data", "wal"):
        device = next((d for d in devices if d.role == role), None)
        if device is not None:
            rows.append((f"{role} device", f"{device.name} ({device.fstype}, "
                         f"{device.mount_point}) for {device.path}"))  # fmt: skip
    return rows


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
