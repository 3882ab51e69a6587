"""What a report says, built from loaded runs (pure: data in, one JSON-ready dict out).

The same dict is embedded in the HTML page, printed by `pgdyno report --json`, and flattened
by `--csv`, so the three outputs cannot disagree. Layout of the dict:

- ``groups``: the sets (or versions, or sessions) being compared, in order, with colours;
- ``summary``: one row per (cell, group) with the repeats' statistics and the verdict against
  the baseline, and ``ladders`` for cumulative plans;
- ``charts``: figures over all cells (TPS vs clients, ladder waterfalls, a capacity sweep's
  latency-throughput curves) and ``capacity``: each sweep's capacity at its latency target;
- ``wait_changes`` and ``wait_profiles``: the wait events whose share of database time moved
  most against the baseline, and each group's database time by wait type (report/waits.py);
- ``cells``: per (workload, scale, clients), the timeline, wait-type, disk, CPU/memory,
  statement and worst-case latency charts of a representative run of each group;
- ``runs``: the drill-down per run, with its own timeline figures drawn when opened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgdyno.formatting import (
    burn_in_line,
    carryover_warnings,
    change_text,
    orders_line,
    switch_cost_line,
)
from pgdyno.records.stored import RunOutcome, StoredRun
from pgdyno.report import capacity, charts, flagged, ladders, profiles, timelines, tpcc, waits
from pgdyno.report.charts import Point
from pgdyno.report.differences import difference_notes, differences
from pgdyno.report.drilldown import run_entry
from pgdyno.report.load import ReportInput
from pgdyno.report.selection import (
    cell_key,
    cell_label,
    group_runs,
    is_ok,
    representative,
    size_label,
    statement_spreads,
    tps_panels,
    worst_spreads,
)
from pgdyno.report.series import CPU_NOTE, DISK_NOTE, TIMELINE_NOTE, chart, run_series
from pgdyno.results.encode import to_json
from pgdyno.stats.analysis import SWITCHED, Analysis, CellKey, Judging, analyse
from pgdyno.stats.carryover import estimates
from pgdyno.stats.summary import describe

MAX_CELL_SECTIONS = 12  # more cells than this get the overview charts and drill-downs only

# The caption under each chart: what is drawn and how to read it.
TPS_CLIENTS_NOTE = (  # {unit}: TPS, or NOPM for TPC-C-like cells
    "Mean {unit} of the repeats with its 95% confidence interval; one line per "
    "group (seed 002's TPS-vs-clients lines)."
)
TPS_BARS_NOTE = (  # one client count: a bar per group, not lines
    "Mean {unit} of the repeats at the one client count measured, with its 95% confidence "
    "interval; one bar per group."
)
STATEMENTS_NOTE = (
    "pgbench -r: average latency of each statement, median over the repeats, error "
    "bars from the fastest to the slowest repeat (seed 000)."
)
WORST_NOTE = (
    "p99, p99.9 and the slowest transaction of each run: median over the repeats, "
    "error bars from the best to the worst repeat (seed 001)."
)
# -- groups ------------------------------------------------------------------------------------


# -- per-second series -------------------------------------------------------------------------


# -- statistics and verdicts -------------------------------------------------------------------


def summary_rows(
    analysis: Analysis, flagged_figures: Mapping[tuple[str, str], dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The verdict table as rows of display strings and raw numbers; `flagged_figures`: the
    figures of (cell label, group)s whose runs were all flagged (report/flagged.py)."""
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
                "figure": r.figure,  # what the tps_* fields measure: "tps", or "nopm" (TPC-C)
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
                # What moved beside the verdict: wait events and CPU functions, "" for none.
                "wait_moves": "; ".join(c.text() for c in r.wait_changes),
                "cpu_moves": "; ".join(c.text() for c in r.cpu_changes),
                # Every finished run flagged for interference: their figures, not judged, and
                # why (the table shows them greyed instead of "-"); None otherwise.
                "flagged": (flagged_figures or {}).get((cell_label(r.cell), r.set_name)),
            }
        )
    return rows


def _tps_by_clients(
    ok_runs: Sequence[StoredRun], groups: Mapping[int, str], colours: Mapping[str, str]
) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    for (workload, scale), cells in tps_panels(ok_runs, groups).items():
        unit = tpcc.label(tpcc.figure_of([r for r in ok_runs if r.workload == workload]))
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
        what = f"{unit} vs clients" if several else f"{unit} at {points[0].x} clients"
        fig = charts.tps_by_clients(
            points, f"{what}: {workload}, {size_label(workload, scale)}", unit
        )
        note = TPS_CLIENTS_NOTE if several else TPS_BARS_NOTE
        if fig:
            figures.append(chart(f"tps-clients-{len(figures)}", fig, note.format(unit=unit)))
    return figures


# -- per cell ----------------------------------------------------------------------------------


def _statement_points(
    by_group: Mapping[str, Sequence[StoredRun]], colours: Mapping[str, str]
) -> list[Point]:
    points = []
    for group, runs in by_group.items():
        for line, command, st in statement_spreads(runs):
            label = command if len(command) <= 60 else command[:59] + "…"
            points.append(
                Point(
                    group,
                    colours[group],
                    f"{line}: {label}",
                    st.median,
                    st.low,
                    st.high,
                    f"{command} (median of {st.n} runs)",
                )
            )
    return points


def _worst_points(
    by_group: Mapping[str, Sequence[StoredRun]], colours: Mapping[str, str]
) -> list[Point]:
    points = []
    for group, runs in by_group.items():
        for label, st in worst_spreads(runs):
            points.append(
                Point(
                    group,
                    colours[group],
                    label,
                    st.median,
                    st.low,
                    st.high,
                    f"median of {st.n} runs, range {st.low:.3g}-{st.high:.3g} ms",
                )
            )
    return points


def _cell_section(
    cell: CellKey,
    runs: Sequence[StoredRun],
    groups: Mapping[int, str],
    colours: Mapping[str, str],
    index: int,
) -> dict[str, Any]:
    by_group: dict[str, list[StoredRun]] = {g: [] for g in colours}
    for run in runs:
        by_group[groups[run.id]].append(run)
    by_group = {g: rs for g, rs in by_group.items() if rs}
    reps = {g: representative(rs) for g, rs in by_group.items()}
    series = [run_series(run, g, colours[g]) for g, run in reps.items()]
    label = cell_label(cell)
    figure = tpcc.figure_of(runs)
    figures, tpcc_last = tpcc.cell_charts(by_group, series, colours, label, index)
    tl = timelines.tps_latency(series, f"TPS and latency over time: {label}")
    if tl:
        note = TIMELINE_NOTE if figure == "tps" else tpcc.TPCC_TIMELINE_NOTE
        figures.append(chart(f"cell-{index}-timeline", tl, note))
    by_type = waits.sessions_by_type(series, f"Active sessions by wait type: {label}")
    if by_type:
        figures.append(chart(f"cell-{index}-waits", by_type, waits.WAITS_NOTE))
    disk = timelines.disk_io(series, f"Disk I/O over time: {label}")
    if disk:
        figures.append(chart(f"cell-{index}-disk", disk, DISK_NOTE))
    cpu = timelines.cpu_memory(series, f"CPU and dirty memory over time: {label}")
    if cpu:
        figures.append(chart(f"cell-{index}-cpu", cpu, CPU_NOTE))
    figures += tpcc_last
    statements = charts.grouped_bars(
        _statement_points(by_group, colours),
        f"Per-statement latency: {label}",
        "latency ms",
        horizontal=True,
    )
    if statements:
        figures.append(
            chart(
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
            chart(
                f"cell-{index}-worst",
                worst,
                WORST_NOTE,
            )
        )
    return {
        "id": f"cell-{index}",
        "label": label,
        "figure": figure,  # what the representative's median is of: "tps" or "nopm"
        "figure_label": tpcc.label(figure),
        "representatives": {g: r.id for g, r in reps.items()},
        "charts": figures,
    }


# -- drill-down per run ------------------------------------------------------------------------


# -- the whole report --------------------------------------------------------------------------


_COMPARISON_KEYS = (
    "id", "name", "plan_path", "mode", "baseline", "status", "started_at", "finished_at",
)  # fmt: skip


def _notes(data: ReportInput, cells: int) -> list[str]:
    notes = []
    if cells > MAX_CELL_SECTIONS:
        notes.append(
            f"{cells} cells: the timelines of the first {MAX_CELL_SECTIONS} are drawn; "
            "every run keeps its own in the drill-down."
        )
    if data.missing:
        notes.append(f"runs not found: {', '.join(map(str, data.missing))}")
    interfered = [r.id for r in data.runs if r.interfered]
    if interfered:
        notes.append(
            f"{len(interfered)} of {len(data.runs)} runs were flagged for interference (other "
            f"processes or the hypervisor took CPU from them): runs "
            f"{', '.join(map(str, interfered))}"
        )
    failed = [r for r in data.runs if r.status != "ok"]
    if failed:
        notes.append(
            f"{len(failed)} of {len(data.runs)} runs did not finish (see their drill-down)"
        )
    return notes


def _comparison_head(data: ReportInput) -> dict[str, object] | None:
    """The comparison's plan and status, and which design ordered its rounds from which seed
    (None and no `orders` sentence for comparisons stored before their rounds were kept)."""
    if data.comparison is None:
        return None
    whole = to_json(data.comparison)
    rounds = data.comparison.rounds
    warmups = {r.warmup_s for r in data.runs}
    warmup = warmups.pop() if len(warmups) == 1 else None
    return {
        **{k: whole[k] for k in _COMPARISON_KEYS},
        "design": rounds.design if rounds else None,
        "seed": rounds.seed if rounds else None,
        "orders": orders_line(rounds.design, rounds.seed) if rounds else None,
        # the unmeasured seconds each run began with after its set was put in effect, as the
        # stored runs say (None when they differ)
        "warmup_s": warmup,
        "burn_in": burn_in_line(warmup, switching=bool(rounds and rounds.design == "switching"))
        if data.runs
        else None,
    }


def carryover_section(
    outcomes: Sequence[RunOutcome], names: Sequence[str], baseline: str, design: str
) -> dict[str, object]:
    """What the set before a run, and the switch to a set, did to its TPS
    (`pgdyno.stats.carryover`, the fits `compare --json` prints): every set's switch cost when
    the design let it be estimated, and a warning per large and significant effect."""
    fits = estimates(outcomes, names, baseline)
    return {
        "fits": [fit.as_dict() for fit in fits],
        "switch_costs": switch_cost_line(fits),
        "warnings": carryover_warnings(fits, design),
    }


def build(data: ReportInput, generated_at: str, version: str) -> dict[str, Any]:
    names, baseline, groups = group_runs(data)
    colours = {name: charts.colour(i) for i, name in enumerate(names)}
    ok_runs = [r for r in data.runs if is_ok(r)]
    # Comparisons pair their sets' runs by round; groups of bench runs (or a comparison's runs
    # grouped by anything but their set) have no rounds to pair.
    by_set = data.comparison is not None and data.by in (None, "set")
    mode = data.comparison.mode if data.comparison and by_set else "sets"
    rounds = data.comparison.rounds if data.comparison and by_set else None
    judging = Judging(
        paired=by_set, sequential=rounds is not None and rounds.adaptive,
        mixture_rounds=rounds.mixture_rounds if rounds is not None else None,
        switched=rounds is not None and rounds.design == SWITCHED,
    )  # fmt: skip
    differing = differences(ok_runs, groups, "set" if by_set else data.by)
    outcomes = [r.outcome(groups[r.id]) for r in data.runs]
    analysis = analyse(outcomes, names, baseline, mode, judging)
    carryover = (
        carryover_section(outcomes, names, baseline, rounds.design if rounds else "rotation")
        if by_set and len(names) > 1
        else None
    )
    by_cell: dict[CellKey, list[StoredRun]] = {}
    for run in ok_runs:
        by_cell.setdefault(cell_key(run), []).append(run)
    cells = sorted(by_cell)
    sections = [
        _cell_section(cell, by_cell[cell], groups, colours, i)
        for i, cell in enumerate(cells[:MAX_CELL_SECTIONS])
    ]
    # One group compares nothing: no baseline, no verdicts (a bench session, say).
    comparing = len(names) > 1
    baseline_reps = {
        cell: representative([r for r in rs if groups[r.id] == baseline])
        for cell, rs in by_cell.items()
        if comparing and any(groups[r.id] == baseline for r in rs)
    }
    sets = {s.name: s for s in data.comparison.sets} if data.comparison else {}
    flagged_figures = flagged.summary_figures(data.runs, groups)
    summary = summary_rows(analysis, flagged_figures) if comparing or ok_runs else []
    ladder_entries = ladders.entries(analysis, data, judging)
    judged = [r for r in ok_runs if not r.interfered]  # what the wait and CPU views pool
    return {
        "title": data.title,
        "source": data.source,
        "generated_at": generated_at,
        "pgdyno_version": version,
        "confidence_pct": round((1.0 - analysis.error_control.alpha) * 100, 3),
        "error_control": analysis.error_control.as_dict(),
        "notes": _notes(data, len(cells)) + difference_notes(differing),
        "grouped_by": data.by or ("set" if data.comparison else None),
        # False for one group (a bench session): the page then speaks of no baseline, verdict
        # or error control, as nothing is compared.
        "comparing": comparing,
        "differences": differing,
        "groups": [
            {
                "name": n,
                "colour": colours[n],
                "baseline": n == baseline,
                "runs": [r.id for r in data.runs if groups[r.id] == n],
            }
            for n in names
        ],
        "comparison": _comparison_head(data),
        # A comparison's carry-over and switch costs (None for runs not grouped by set)
        "carryover": carryover,
        "summary": summary,
        "figure_label": tpcc.summary_label(summary),  # heads the summary's throughput columns
        "ladders": ladders.rows(analysis, ladder_entries),
        # A capacity sweep's runs ran at rates it chose: their mean TPS says nothing (a
        # comparison's runs are closed-loop; its sets' sweeps are sessions of their own).
        "charts": (
            []
            if data.capacities and data.comparison is None
            else _tps_by_clients(ok_runs, groups, colours)
        )
        + ladders.waterfalls(analysis, ladder_entries)
        + capacity.curve_charts(data.capacities, colours),
        # Capacity sweeps: the capacity at the p99 target with its interval, the knee.
        "capacity": capacity.rows(data.capacities),
        # The wait events whose share moved most against the baseline, per cell and group,
        # and each group's database time by wait type, from the runs the verdicts judge (not
        # those flagged for interference); [] for runs without a profile.
        "wait_changes": waits.change_rows(analysis),
        # The functions whose share of the server's CPU moved most against the baseline,
        # beyond sampling error (stats/cpu_profile.py); [] for runs without a CPU profile.
        "cpu_changes": profiles.change_rows(analysis),
        # Per cell and group, a flame graph of its call chains coloured by their move against
        # the baseline's (judged runs, as the wait profiles); [] without call chains.
        "cpu_flames": (
            profiles.differential_flame_graphs(judged, groups, names, analysis.baseline)
            if comparing
            else []
        ),
        "wait_profiles": waits.profile_rows(judged, groups, names),
        "cells": sections,
        "runs": [
            run_entry(
                r,
                groups[r.id],
                colours[groups[r.id]],
                baseline_reps.get(cell_key(r)),
                sets.get(groups[r.id]),
            )
            for r in data.runs
        ],
    }
