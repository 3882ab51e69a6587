"""What a report says, built from loaded runs (pure: data in, one JSON-ready dict out).

The same dict is embedded in the HTML page, printed by `pgdyno report --json`, and flattened
by `--csv`, so the three outputs cannot disagree. Layout of the dict:

- ``groups``: the sets (or versions, or sessions) being compared, in order, with colours;
- ``summary``: one row per (cell, group) with the repeats' statistics and the verdict against
  the baseline, and ``ladders`` for cumulative plans;
- ``charts``: figures over all cells (TPS vs clients, ladder waterfalls);
- ``cells``: per (workload, scale, clients), the timeline, disk, CPU/memory, statement and
  worst-case latency charts of a representative run of each group;
- ``runs``: the drill-down per run, with its own timeline figures drawn when opened.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pgdyno.experiment.verdicts import Analysis, CellKey, analyse
from pgdyno.render.compare import change_text
from pgdyno.report import charts
from pgdyno.report.charts import Point, Series, Step
from pgdyno.report.load import ReportInput
from pgdyno.stats.compare import COMPARE_CONFIDENCE, describe

MAX_CELL_SECTIONS = 12  # more cells than this get the overview charts and drill-downs only

# The caption under each chart: what is drawn and how to read it.
TPS_CLIENTS_NOTE = (
    "Mean TPS of the repeats with its 95% confidence interval; one line per "
    "group (seed 002's TPS-vs-clients lines)."
)
LADDER_NOTE = (
    "Each step adds its settings to the previous one; bars show the median TPS as "
    "% of the first step, error bars the 97.5% interval of the cumulative change, "
    "hover for each step's own gain."
)
STATEMENTS_NOTE = (
    "pgbench -r: average latency of each statement, median over the repeats, error "
    "bars from the fastest to the slowest repeat (seed 000)."
)
WORST_NOTE = (
    "p99, p99.9 and the slowest transaction of each run: median over the repeats, "
    "error bars from the best to the worst repeat (seed 001)."
)
TIMELINE_NOTE = (
    "The repeat with the median TPS of each group. Latency: dotted p50, solid p99, dashed max "
    "(log scale). Shaded spans and ▼ mark checkpoints (hover for buffers written and timings)."
)
DISK_NOTE = "Solid: write MB/s, dotted: read MB/s, same definitions as iostat -x."
CPU_NOTE = "CPU: solid user, dashed system, dotted iowait. Memory: solid Dirty, dotted Writeback."


def cell_label(cell: CellKey) -> str:
    """
    >>> cell_label(("select-only", 10, 4))
    'select-only, scale 10, 4 clients'
    """
    workload, scale, clients = cell
    return f"{workload}, scale {scale}, {clients} client{'s' if clients != 1 else ''}"


def _cell(run: Mapping[str, Any]) -> CellKey:
    return (str(run["workload"]), int(run["scale"]), int(run["clients"]))


def _ok(run: Mapping[str, Any]) -> bool:
    return run["status"] == "ok" and bool(run.get("tps"))


# -- groups ------------------------------------------------------------------------------------


def group_runs(data: ReportInput) -> tuple[list[str], str, dict[int, str]]:
    """Group names in order, the baseline group, and each run's group.

    A comparison groups by set (its baseline first as the plan says); other runs by
    PostgreSQL version when they differ, else by bench session, else all in one group.
    """
    runs = data.runs
    if data.comparison is not None:
        names = [s["name"] for s in data.comparison["sets"]]
        return names, str(data.comparison["baseline"]), {r["id"]: r["set_name"] for r in runs}
    if len({r["pg_version"] for r in runs}) > 1:
        key = {r["id"]: f"PostgreSQL {r['pg_version']}" for r in runs}
    elif len({r["session_id"] for r in runs}) > 1:
        key = {r["id"]: f"session {r['session_id']}" for r in runs}
    else:
        key = {r["id"]: str(runs[0]["target"]) for r in runs}
    names = list(dict.fromkeys(key[r["id"]] for r in runs))
    return names, names[0], key


# -- per-second series -------------------------------------------------------------------------


def _checkpoints(run: Mapping[str, Any], t0: float) -> list[dict[str, Any]]:
    """Checkpoint spans from start to complete events, as seconds into the run."""
    spans: list[dict[str, Any]] = []
    start: float | None = None
    for event in run.get("events", []):
        if event["kind"] == "checkpoint_start":
            start = float(event["t"])
        elif event["kind"] == "checkpoint_complete":
            begin = start if start is not None else float(event["t"])
            detail = event.get("detail") or {}
            text = "checkpoint: " + ", ".join(
                f"{k.replace('_', ' ')} {v}" for k, v in detail.items() if v is not None
            )
            spans.append(
                {
                    "x0": round(begin - t0, 3),
                    "x1": round(float(event["t"]) - t0, 3),
                    "text": text[:300],
                }
            )
            start = None
    if start is not None:
        spans.append(
            {
                "x0": round(start - t0, 3),
                "x1": round(start - t0, 3),
                "text": "checkpoint started, not complete by the end of the run",
            }
        )
    return spans


def run_series(run: Mapping[str, Any], group: str, colour: str) -> Series:
    """Every per-second value of a run, x = seconds since its first measured second."""
    seconds = run.get("seconds") or []
    samples: Mapping[str, Mapping[int, float]] = run.get("samples") or {}
    starts = [row["t"] for row in seconds] or [t for s in samples.values() for t in s]
    t0 = float(min(starts)) if starts else 0.0
    values: dict[str, list[tuple[float, float]]] = {}
    for row in seconds:
        for name, value in row.items():
            if name != "t" and value is not None:
                values.setdefault(name, []).append((row["t"] - t0, float(value)))
    for name, points in samples.items():
        values[name] = [(t - t0, float(v)) for t, v in sorted(points.items())]
    return Series(group, colour, values, _checkpoints(run, t0))


def devices(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, kernel name) of the data device, then the WAL device when it is another one."""
    found = run.get("devices") or {}
    out: list[tuple[str, str]] = []
    for role in ("data", "wal"):
        dev = found.get(role) if isinstance(found, dict) else None
        name = dev.get("name") if isinstance(dev, dict) else None
        if name and all(name != n for _, n in out):
            out.append((role, str(name)))
    return out


# -- statistics and verdicts -------------------------------------------------------------------


def summary_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """The verdict table as rows of display strings and raw numbers."""
    rows = []
    for r in analysis.results:
        is_base = r.set_name == analysis.baseline
        change = r.tps_change
        rows.append(
            {
                "cell": cell_label(r.cell),
                "workload": r.cell[0],
                "scale": r.cell[1],
                "clients": r.cell[2],
                "group": r.set_name,
                "baseline": is_base,
                "runs": r.runs,
                "failed": r.failed,
                "tps_median": r.tps.median if r.tps else None,
                "tps_mean": r.tps.mean if r.tps else None,
                "tps_ci_low": r.tps.ci_low if r.tps else None,
                "tps_ci_high": r.tps.ci_high if r.tps else None,
                "tps_cv_pct": r.tps.cv_pct if r.tps else None,
                "p99_median_ms": r.p99_ms.median if r.p99_ms else None,
                "tps_change_pct": change.change_pct if change else None,
                "tps_change_ci_low_pct": change.ci_low_pct if change else None,
                "tps_change_ci_high_pct": change.ci_high_pct if change else None,
                "tps_change": change_text(change),
                "p99_change": change_text(r.p99_change),
                "p99_verdict": r.p99_change.verdict if r.p99_change else None,
                "verdict": "baseline" if is_base else (change.verdict if change else None),
                "noisy": bool(change and change.noisy),
                "repeats_needed": change.repeats_needed if change else None,
                "warnings": list(r.warnings),
            }
        )
    return rows


def ladder_rows(analysis: Analysis) -> list[dict[str, Any]]:
    out = []
    for cell, lad in analysis.ladders:
        out.append(
            {
                "cell": cell_label(cell),
                "total": change_text(lad.total),
                "total_verdict": lad.total.verdict if lad.total else None,
                "steps": [
                    {
                        "name": s.name,
                        "tps_median": s.stats.median,
                        "level_pct": s.level_pct,
                        "step_gain": change_text(s.step_gain),
                        "verdict": s.step_gain.verdict if s.step_gain else "first step",
                        "cumulative": change_text(s.cumulative),
                    }
                    for s in lad.steps
                ],
            }
        )
    return out


def _waterfalls(analysis: Analysis) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    for cell, lad in analysis.ladders:
        steps = []
        for s in lad.steps:
            cum = s.cumulative
            low = high = None
            if cum is not None and cum.ci_low_pct is not None and cum.ci_high_pct is not None:
                low, high = 100 + cum.ci_low_pct, 100 + cum.ci_high_pct
            steps.append(Step(s.name, s.level_pct, low, high, change_text(s.step_gain)))
        total = f"{change_text(lad.total)}, {lad.total.verdict}" if lad.total else "-"
        fig = charts.waterfall(steps, total, f"Tuning ladder: {cell_label(cell)}")
        if fig:
            figures.append(
                _chart(
                    f"ladder-{len(figures)}",
                    fig,
                    LADDER_NOTE,
                )
            )
    return figures


def _tps_by_clients(
    ok_runs: Sequence[Mapping[str, Any]], groups: Mapping[int, str], colours: Mapping[str, str]
) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    panels: dict[tuple[str, int], dict[tuple[str, int], list[float]]] = {}
    for run in ok_runs:
        key = (str(run["workload"]), int(run["scale"]))
        panels.setdefault(key, {}).setdefault((groups[run["id"]], int(run["clients"])), []).append(
            float(run["tps"])
        )
    for (workload, scale), cells in panels.items():
        points = []
        for group in colours:
            for (g, clients), values in sorted(cells.items(), key=lambda kv: kv[0][1]):
                if g != group:
                    continue
                st = describe(values)
                points.append(
                    Point(
                        group,
                        colours[group],
                        clients,
                        st.mean,
                        st.ci_low,
                        st.ci_high,
                        f"mean of {st.n}, median {st.median:,.0f}, {clients} clients",
                    )
                )
        several = len({p.x for p in points}) > 1
        what = "TPS vs clients" if several else f"TPS at {points[0].x} clients"
        fig = charts.tps_by_clients(points, f"{what}: {workload}, scale {scale}")
        if fig:
            figures.append(
                _chart(
                    f"tps-clients-{len(figures)}",
                    fig,
                    TPS_CLIENTS_NOTE,
                )
            )
    return figures


def _chart(chart_id: str, figure: Mapping[str, Any], note: str) -> dict[str, Any]:
    return {"id": chart_id, "figure": figure, "note": note}


# -- per cell ----------------------------------------------------------------------------------


def representative(runs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The repeat with the median TPS (the lower one of an even count)."""
    ranked = sorted(runs, key=lambda r: float(r["tps"]))
    return ranked[(len(ranked) - 1) // 2]


def _statement_points(
    by_group: Mapping[str, Sequence[Mapping[str, Any]]], colours: Mapping[str, str]
) -> list[Point]:
    points = []
    for group, runs in by_group.items():
        per_line: dict[tuple[int, int], list[float]] = {}
        commands: dict[tuple[int, int], str] = {}
        for run in runs:
            for st in run.get("statements") or []:
                key = (int(st["script"]), int(st["line"]))
                per_line.setdefault(key, []).append(float(st["latency_ms"]))
                commands[key] = str(st["command"])
        for key in sorted(per_line):
            values = per_line[key]
            label = commands[key] if len(commands[key]) <= 60 else commands[key][:59] + "…"
            points.append(
                Point(
                    group,
                    colours[group],
                    f"{key[1]}: {label}",
                    statistics.median(values),
                    min(values),
                    max(values),
                    f"{commands[key]} (median of {len(values)} runs)",
                )
            )
    return points


def _worst_points(
    by_group: Mapping[str, Sequence[Mapping[str, Any]]], colours: Mapping[str, str]
) -> list[Point]:
    points = []
    for group, runs in by_group.items():
        for column, label in (
            ("latency_p99_ms", "p99"),
            ("latency_p999_ms", "p99.9"),
            ("latency_max_ms", "max"),
        ):
            values = [float(r[column]) for r in runs if r.get(column) is not None]
            if values:
                points.append(
                    Point(
                        group,
                        colours[group],
                        label,
                        statistics.median(values),
                        min(values),
                        max(values),
                        f"median of {len(values)} runs, range {min(values):.3g}-"
                        f"{max(values):.3g} ms",
                    )
                )
    return points


def _cell_section(
    cell: CellKey,
    runs: Sequence[Mapping[str, Any]],
    groups: Mapping[int, str],
    colours: Mapping[str, str],
    index: int,
) -> dict[str, Any]:
    by_group: dict[str, list[Mapping[str, Any]]] = {g: [] for g in colours}
    for run in runs:
        by_group[groups[run["id"]]].append(run)
    by_group = {g: rs for g, rs in by_group.items() if rs}
    reps = {g: representative(rs) for g, rs in by_group.items()}
    series = [run_series(run, g, colours[g]) for g, run in reps.items()]
    label = cell_label(cell)
    figures: list[dict[str, Any]] = []
    tl = charts.tps_latency(series, f"TPS and latency over time: {label}")
    if tl:
        figures.append(_chart(f"cell-{index}-timeline", tl, TIMELINE_NOTE))
    devs = next((devices(r) for r in reps.values() if devices(r)), [])
    disk = charts.disk_io(series, devs, f"Disk I/O over time: {label}")
    if disk:
        figures.append(_chart(f"cell-{index}-disk", disk, DISK_NOTE))
    cpu = charts.cpu_memory(series, f"CPU and dirty memory over time: {label}")
    if cpu:
        figures.append(_chart(f"cell-{index}-cpu", cpu, CPU_NOTE))
    statements = charts.grouped_bars(
        _statement_points(by_group, colours),
        f"Per-statement latency: {label}",
        "latency ms",
        horizontal=True,
    )
    if statements:
        figures.append(
            _chart(
                f"cell-{index}-statements",
                statements,
                STATEMENTS_NOTE,
            )
        )
    worst = charts.grouped_bars(
        _worst_points(by_group, colours), f"Worst-case latency: {label}", "latency ms"
    )
    if worst:
        figures.append(
            _chart(
                f"cell-{index}-worst",
                worst,
                WORST_NOTE,
            )
        )
    return {
        "id": f"cell-{index}",
        "label": label,
        "representatives": {g: int(r["id"]) for g, r in reps.items()},
        "charts": figures,
    }


# -- drill-down per run ------------------------------------------------------------------------


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


def _run_entry(
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
            figures.append(_chart(f"run-{run['id']}-{chart_id}", fig, note))
    is_baseline_run = baseline_run is not None and baseline_run["id"] == run["id"]
    return {
        "id": int(run["id"]),
        "group": group,
        "cell": cell_label(_cell(run)),
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


# -- the whole report --------------------------------------------------------------------------


def build(data: ReportInput, generated_at: str, version: str) -> dict[str, Any]:
    names, baseline, groups = group_runs(data)
    colours = {name: charts.colour(i) for i, name in enumerate(names)}
    ok_runs = [r for r in data.runs if _ok(r)]
    mode = str(data.comparison["mode"]) if data.comparison else "sets"
    analysis = analyse(
        [{**r, "set_name": groups[r["id"]]} for r in data.runs], names, baseline, mode
    )
    by_cell: dict[CellKey, list[Mapping[str, Any]]] = {}
    for run in ok_runs:
        by_cell.setdefault(_cell(run), []).append(run)
    cells = sorted(by_cell)
    sections = [
        _cell_section(cell, by_cell[cell], groups, colours, i)
        for i, cell in enumerate(cells[:MAX_CELL_SECTIONS])
    ]
    baseline_reps = {
        cell: representative([r for r in rs if groups[r["id"]] == baseline])
        for cell, rs in by_cell.items()
        if any(groups[r["id"]] == baseline for r in rs)
    }
    sets = {s["name"]: s for s in data.comparison["sets"]} if data.comparison else {}
    notes = []
    if len(cells) > MAX_CELL_SECTIONS:
        notes.append(
            f"{len(cells)} cells: the timelines of the first {MAX_CELL_SECTIONS} are drawn; "
            "every run keeps its own in the drill-down."
        )
    if data.missing:
        notes.append(f"runs not found: {', '.join(map(str, data.missing))}")
    failed = [r for r in data.runs if r["status"] != "ok"]
    if failed:
        notes.append(
            f"{len(failed)} of {len(data.runs)} runs did not finish (see their drill-down)"
        )
    return {
        "title": data.title,
        "source": data.source,
        "generated_at": generated_at,
        "pgdyno_version": version,
        "confidence_pct": round(COMPARE_CONFIDENCE * 100, 1),
        "notes": notes,
        "groups": [
            {
                "name": n,
                "colour": colours[n],
                "baseline": n == baseline,
                "runs": [r["id"] for r in data.runs if groups[r["id"]] == n],
            }
            for n in names
        ],
        "comparison": None
        if data.comparison is None
        else {
            k: data.comparison[k]
            for k in (
                "id",
                "name",
                "plan_path",
                "mode",
                "baseline",
                "status",
                "started_at",
                "finished_at",
            )
        },
        "summary": summary_rows(analysis) if len(names) > 1 or ok_runs else [],
        "ladders": ladder_rows(analysis),
        "charts": _tps_by_clients(ok_runs, groups, colours) + _waterfalls(analysis),
        "cells": sections,
        "runs": [
            _run_entry(
                r,
                groups[r["id"]],
                colours[groups[r["id"]]],
                baseline_reps.get(_cell(r)),
                sets.get(groups[r["id"]]),
            )
            for r in data.runs
        ],
    }
