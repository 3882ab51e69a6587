"""On-CPU profiles in the report: a flame graph per run, the functions whose share of the
server's CPU moved most against the baseline, and per cell and group a differential flame graph
against the baseline (pure).

The flame graph is Plotly's icicle trace of the run's folded call chains, root at the bottom
as in Gregg's flame graphs (Gregg, 2016, "The flame graph", Communications of the ACM 59(6)):
a frame's width is its share of the samples, its children the functions it called. plotly.js
is inlined in the page, so it needs no network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgdyno.records.profile import CpuProfile
from pgdyno.records.stored import StoredRun
from pgdyno.report.charts import Figure, figure_layout
from pgdyno.report.selection import cell_key, cell_label
from pgdyno.report.series import chart
from pgdyno.stats.analysis import Analysis, CellKey
from pgdyno.stats.cpu_profile import FrameMove, frame_moves

ROOT = "all"
OTHER = "(call chains not kept)"
FLAME_HEIGHT_PX = 460
PROFILE_NOTE = (
    "On-CPU profile (perf, cpu-clock samples): each bar is a function, as wide as its share "
    "of the server's CPU samples, on top of the function that called it; the bottom row is all "
    "of them, the one above it the process type. Call chains stop short where the binary has "
    "no frame pointers. Click a bar to zoom, the bottom one to zoom out."
)
TOP_FUNCTIONS = 10
DIFFERENTIAL_NOTE = (
    "Differential flame graph: the frames as the {group} runs have them, as wide as their share "
    "of its CPU samples; red took more of the CPU than in the baseline's runs, blue less, by "
    "the points the colour scale shows, white within sampling error (3.5 standard errors, or "
    "under a point; taken the way least in its favour where a run did not keep every call "
    "chain). A frame the {group} runs never reached cannot be drawn in their shape: {gone}. "
    "Click a bar to zoom, the bottom one to zoom out."
)
GONE_SHOWN = 5  # frames the other group never reached, named in the caption
# Blue (less CPU than the baseline), white (no move beyond sampling error), red (more).
DIFFERENTIAL_SCALE = ((0.0, "#2166ac"), (0.5, "#f7f7f7"), (1.0, "#b2182b"))


def _pct(share: float) -> float:
    return round(100.0 * share, 3)


def _nodes(found: CpuProfile) -> dict[str, int]:
    """Every prefix of the kept call chains (`all;process;outer;...`) and its samples.

    >>> p = CpuProfile(99, 4, 0.0, (), (), (("client backend;a;b", 2), ("client backend;a", 1)), 1)
    >>> _nodes(p)
    {'all': 4, 'all;client backend': 3, 'all;client backend;a': 3, 'all;client backend;a;b': 2, \
'all;(call chains not kept)': 1}
    """
    nodes: dict[str, int] = {ROOT: found.samples}
    for stack, count in found.folded:
        path = ROOT
        for frame in stack.split(";"):
            path = f"{path};{frame}"
            nodes[path] = nodes.get(path, 0) + count
    if found.folded_other:
        nodes[f"{ROOT};{OTHER}"] = found.folded_other
    return nodes


def _icicle(nodes: Mapping[str, int], title: str, **trace: Any) -> Figure:
    """A flame graph of `nodes` (`all;process;outer;...` -> samples under it, parents before
    children): Plotly's icicle, root at the bottom; `trace` adds to or overrides the trace."""
    ids = list(nodes)
    icicle = {
        "type": "icicle",
        "ids": ids,
        "labels": [i.rsplit(";", 1)[-1] for i in ids],
        "parents": ["" if i == ROOT else i.rsplit(";", 1)[0] for i in ids],
        "values": [nodes[i] for i in ids],
        "branchvalues": "total",
        "tiling": {"orientation": "v", "flip": "y"},
        "maxdepth": 12,
        **trace,
    }
    layout = figure_layout(title, height=FLAME_HEIGHT_PX)
    layout["margin"] = {"l": 8, "r": 8, "t": 48, "b": 8}
    return {"data": [icicle], "layout": layout}


def flame_graph(found: CpuProfile | None, title: str) -> Figure | None:
    """The run's flame graph as a Plotly figure; None without a profile or call chains."""
    if found is None or not found.folded:
        return None
    return _icicle(
        _nodes(found),
        title,
        hovertemplate="%{label}<br>%{value} samples, %{percentRoot:.1%} of the run's CPU"
        "<extra></extra>",
        marker={"colorscale": "YlOrRd"},
    )


def run_functions(found: CpuProfile | None) -> dict[str, Any] | None:
    """A run's drill-down figures: samples, kernel share, CPU by process type and the top
    functions; None when the run has no profile."""
    if found is None:
        return None
    top = sorted(found.top, key=lambda f: -f.share)[:TOP_FUNCTIONS]
    return {
        "samples": found.samples,
        "sample_hz": found.sample_hz,
        "kernel_pct": _pct(found.kernel_share),
        "by_process": [{"process": p, "pct": _pct(s)} for p, s in found.by_process],
        "top": [
            {"process": f.process, "function": f.function, "kernel": f.kernel, "pct": _pct(f.share)}
            for f in top
        ],
    }


def change_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """Per cell and group, the functions whose share of the server's CPU moved most against
    the baseline (`SetResult.cpu_changes`), in points of percent."""
    return [
        {
            "cell": cell_label(r.cell),
            "group": r.set_name,
            "baseline_group": analysis.baseline,
            "function": c.function,
            "baseline_pct": _pct(c.before),
            "group_pct": _pct(c.after),
            "change_points": _pct(c.change),
        }
        for r in analysis.results
        for c in r.cpu_changes
    ]


def _gone(moves: Sequence[FrameMove]) -> str:
    """The frames the group never reached whose fall is beyond sampling error, largest first.

    >>> _gone([FrameMove("client backend;exec;parse", 0, 0.3, 0.0, -0.3)])
    'gone beyond sampling error: parse (client backend;exec) -30.0 points'
    >>> _gone([])
    'none is gone beyond sampling error'
    """
    gone = sorted((m for m in moves if not m.samples and m.change), key=lambda m: m.change)
    if not gone:
        return "none is gone beyond sampling error"
    named = []
    for m in gone[:GONE_SHOWN]:
        caller, _, frame = m.path.rpartition(";")
        named.append(f"{frame}{f' ({caller})' if caller else ''} {_pct(m.change):+.1f} points")
    more = f" and {len(gone) - GONE_SHOWN} more" if len(gone) > GONE_SHOWN else ""
    return "gone beyond sampling error: " + "; ".join(named) + more


def _differential_figure(moves: Sequence[FrameMove], total: int, title: str) -> Figure:
    """The icicle of a group's frames coloured by their move in points (`frame_moves`)."""
    drawn = [m for m in moves if m.samples]
    nodes = {ROOT: total} | {f"{ROOT};{m.path}": m.samples for m in drawn}
    changes = [0.0] + [_pct(m.change) for m in drawn]
    shares = ["all of the CPU in both"] + [
        f"{_pct(m.before):.1f}% of the baseline's CPU, {_pct(m.after):.1f}% here" for m in drawn
    ]
    kept = sum(m.samples for m in drawn if ";" not in m.path)  # the process types' samples
    if total > kept:
        nodes[f"{ROOT};{OTHER}"] = total - kept
        changes.append(0.0)
        shares.append(f"{_pct((total - kept) / total):.1f}% here")
    reach = max(map(abs, changes)) or 1.0
    said = [f"{c:+.1f} points, beyond sampling error" if c else "within sampling error"
            for c in changes]  # fmt: skip
    return _icicle(
        nodes,
        title,
        customdata=[[a, b] for a, b in zip(shares, said, strict=True)],
        hovertemplate="%{label}<br>%{customdata[0]}: %{customdata[1]}<extra></extra>",
        marker={
            "colors": changes,
            "colorscale": [list(stop) for stop in DIFFERENTIAL_SCALE],
            "cmin": -reach,
            "cmid": 0.0,
            "cmax": reach,
            "showscale": True,
            "colorbar": {"title": {"text": "points"}, "thickness": 12},
        },
    )


def differential_flame_graphs(
    runs: Sequence[StoredRun], groups: Mapping[int, str], names: Sequence[str], baseline: str
) -> list[dict[str, Any]]:
    """Per cell and group other than the baseline, its differential flame graph against the
    baseline's runs of the cell (from `runs`: those the caller judges), as report charts;
    [] where either side has no call chains."""
    by_cell: dict[CellKey, dict[str, list[CpuProfile]]] = {}
    for run in runs:
        if run.profile is not None:
            by_cell.setdefault(cell_key(run), {}).setdefault(groups[run.id], []).append(run.profile)
    charts: list[dict[str, Any]] = []
    for cell in sorted(by_cell):
        base = by_cell[cell].get(baseline, [])
        for name in (n for n in names if n != baseline and n in by_cell[cell]):
            mine = by_cell[cell][name]
            moves = frame_moves(base, mine)
            if not moves:
                continue
            title = f"{cell_label(cell)}: {name} against {baseline}, CPU by call chain"
            figure = _differential_figure(moves, sum(p.samples for p in mine), title)
            charts.append(
                chart(
                    f"flame-diff-{len(charts) + 1}",
                    figure,
                    DIFFERENTIAL_NOTE.format(group=name, gone=_gone(moves)),
                )
            )
    return charts
