"""The drill-down of one run: its charts, result, stability, settings and environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgdyno.report import charts
from pgdyno.report.selection import cell_key, cell_label
from pgdyno.report.series import CPU_NOTE, DISK_NOTE, TIMELINE_NOTE, chart, devices, run_series


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


def _environment(run: Mapping[str, Any]) -> dict[str, Any]:
    host = run.get("host") or {}
    env: dict[str, Any] = {
        "target": run.get("target"),
        "PostgreSQL": run.get("pg_version"),
        "pgbench": run.get("pgbench_version"),
        "kernel": host.get("kernel"),
        "CPU": f"{host.get('cpu_model')} ({host.get('cpu_count')} usable)",
        "RAM": f"{(host.get('memory_bytes') or 0) / 2**30:.1f} GiB usable",
    }
    for role, dev in (run.get("devices") or {}).items():
        if isinstance(dev, dict):
            env[f"{role} device"] = (
                f"{dev.get('name')} ({dev.get('fstype')} on {dev.get('mount_point')}, "
                f"{dev.get('mount_options')}; scheduler {dev.get('scheduler')}, read_ahead_kb "
                f"{dev.get('read_ahead_kb')}, {'rotational' if dev.get('rotational') else 'SSD'})"
            )
    return env


def run_entry(
    run: Mapping[str, Any],
    group: str,
    colour: str,
    baseline_run: Mapping[str, Any] | None,
    set_info: Mapping[str, Any] | None,
) -> dict[str, Any]:
    health = run.get("health") or {}
    series = [run_series(run, group, colour)]
    figures: list[dict[str, Any]] = []
    for chart_id, fig, note in (
        ("timeline", charts.tps_latency(series, "TPS and latency over time"), TIMELINE_NOTE),
        ("disk", charts.disk_io(series, devices(run), "Disk I/O over time"), DISK_NOTE),
        ("cpu", charts.cpu_memory(series, "CPU and dirty memory over time"), CPU_NOTE),
    ):
        if fig:
            figures.append(chart(f"run-{run['id']}-{chart_id}", fig, note))
    is_baseline_run = baseline_run is not None and baseline_run["id"] == run["id"]
    return {
        "id": int(run["id"]),
        "group": group,
        "cell": cell_label(cell_key(run)),
        "repeat": run.get("repeat"),
        "status": run["status"],
        "error": run.get("error"),
        "started_at": run.get("started_at"),
        "tps": run.get("tps"),
        "latency": {
            k: run.get(f"latency_{k}_ms") for k in ("avg", "p50", "p90", "p99", "p999", "max")
        },
        "latency_source": run.get("latency_source"),
        "stability": {k: health.get(k) for k in ("tps_cv_pct", "tps_trend_pct", "client_cpu_pct")},
        "warnings": list(health.get("warnings") or []),
        "set": set_info,
        "settings_baseline_run": None if baseline_run is None else int(baseline_run["id"]),
        "settings_diff": []
        if baseline_run is None or is_baseline_run
        else settings_diff(run.get("settings") or {}, baseline_run.get("settings") or {}),
        "settings": run.get("settings") or {},
        "environment": _environment(run),
        "pgbench_argv": " ".join(run.get("pgbench_argv") or []),
        "charts": figures,
    }
