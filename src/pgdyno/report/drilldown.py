"""The drill-down of one run: its charts, result, stability, settings and environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgdyno.postgres.settings import shown_settings
from pgdyno.records.health import RunHealth
from pgdyno.records.stored import ComparisonSet, StoredRun
from pgdyno.report import profiles, timelines, tpcc, waits
from pgdyno.report.selection import cell_key, cell_label
from pgdyno.report.series import CPU_NOTE, DISK_NOTE, TIMELINE_NOTE, chart, run_series
from pgdyno.results.encode import interference_json, to_json


def settings_diff(settings: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Settings whose value differs from the baseline's (ports and paths too: they are facts).

    >>> settings_diff({"a": "1", "b": "2"}, {"a": "1", "c": "3"})
    [{'name': 'b', 'baseline': None, 'value': '2'}, {'name': 'c', 'baseline': '3', 'value': None}]
    """
    names = sorted(set(settings) | set(baseline))
    return [
        {"name": n, "baseline": baseline.get(n), "value": settings.get(n)}
        for n in names
        if settings.get(n) != baseline.get(n)
    ]


def _environment(run: StoredRun) -> dict[str, Any]:
    host = run.host_brief
    env: dict[str, Any] = {
        "target": run.target,
        "PostgreSQL": run.pg_version,
        "pgbench": run.pgbench_version,
        "kernel": host.kernel,
        "CPU": f"{host.cpu_model} ({host.cpu_count} usable)",
        "RAM": f"{(host.memory_bytes or 0) / 2**30:.1f} GiB usable",
    }
    for dev in run.device_list():
        env[f"{dev.role} device"] = (
            f"{dev.name} ({dev.fstype} on {dev.mount_point}, "
            f"{dev.mount_options}; scheduler {dev.scheduler}, read_ahead_kb "
            f"{dev.read_ahead_kb}, {'rotational' if dev.rotational else 'SSD'})"
        )
    return env


def run_entry(
    run: StoredRun,
    group: str,
    colour: str,
    baseline_run: StoredRun | None,
    set_info: ComparisonSet | None,
) -> dict[str, Any]:
    health = run.health or RunHealth()
    series = [run_series(run, group, colour)]
    figures = tpcc.run_charts(run, series[0])
    timeline_note = TIMELINE_NOTE if run.tpcc is None else tpcc.TPCC_TIMELINE_NOTE
    for chart_id, fig, note in (
        ("timeline", timelines.tps_latency(series, "TPS and latency over time"), timeline_note),
        ("waits", waits.sessions_by_type(series, "Active sessions by wait type"), waits.WAITS_NOTE),
        ("disk", timelines.disk_io(series, "Disk I/O over time"), DISK_NOTE),
        ("cpu", timelines.cpu_memory(series, "CPU and dirty memory over time"), CPU_NOTE),
    ):
        if fig:
            figures.append(chart(f"run-{run.id}-{chart_id}", fig, note))
    flame = profiles.flame_graph(run.profile, "Where the server's CPU went (flame graph)")
    if flame:
        figures.append(chart(f"run-{run.id}-flame", flame, profiles.PROFILE_NOTE))
    is_baseline_run = baseline_run is not None and baseline_run.id == run.id
    latency = {
        "avg": run.latency_avg_ms, "p50": run.latency_p50_ms, "p90": run.latency_p90_ms,
        "p99": run.latency_p99_ms, "p999": run.latency_p999_ms, "max": run.latency_max_ms,
    }  # fmt: skip
    return {
        "id": run.id,
        "group": group,
        "cell": cell_label(cell_key(run)),
        "repeat": run.repeat,
        "status": run.status,
        "error": run.error,
        "started_at": run.started_at,
        "tps": run.tps,
        # NOPM, TPM, the mix, consistency and the per-type table of a TPC-C-like run; else None.
        "tpcc": tpcc.run_figures(run),
        "latency": latency,
        "latency_source": run.latency_source,
        "stability": {
            "tps_cv_pct": health.tps_cv_pct,
            "tps_trend_pct": health.tps_trend_pct,
            "client_cpu_pct": health.client_cpu_pct,
        },
        "warnings": list(health.warnings),
        "waits": waits.run_waits(run),  # the top wait events; None: not sampled
        "profile": profiles.run_functions(run.profile),  # top CPU functions; None: no profile
        # Foreign CPU and steal of a flagged run, as `runs show --json` has it; None: clean.
        "interference": None if run.interference is None else interference_json(run.interference),
        "set": None if set_info is None else to_json(set_info),
        "settings_baseline_run": None if baseline_run is None else baseline_run.id,
        "settings_diff": []
        if baseline_run is None or is_baseline_run
        else settings_diff(shown_settings(run.settings), shown_settings(baseline_run.settings)),
        "settings": shown_settings(run.settings),  # as SHOW prints them, not "16384 8kB"
        "environment": _environment(run),
        "pgbench_argv": " ".join(run.pgbench_argv),
        "charts": figures,
    }
