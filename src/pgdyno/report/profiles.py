"""On-CPU profiles in the report: a flame graph per run, and the functions whose share of the
server's CPU moved most against the baseline (pure).

The flame graph is Plotly's icicle trace of the run's folded call chains, root at the bottom
as in Gregg's flame graphs (Gregg, 2016, "The flame graph", Communications of the ACM 59(6)):
a frame's width is its share of the samples, its children the functions it called. plotly.js
is inlined in the page, so it needs no network.
"""

from __future__ import annotations

from typing import Any

from pgdyno.records.profile import CpuProfile
from pgdyno.report.charts import Figure, figure_layout
from pgdyno.report.selection import cell_label
from pgdyno.stats.analysis import Analysis

ROOT = "all"
OTHER = "(call chains not kept)"
FLAME_HEIGHT_PX = 460
PROFILE_NOTE = (
    "On-CPU profile (perf, cpu-clock at 99 Hz): each bar is a function, as wide as its share "
    "of the server's CPU samples, on top of the function that called it; the bottom row is all "
    "of them, the one above it the process type. Call chains stop short where the binary has "
    "no frame pointers. Click a bar to zoom, the bottom one to zoom out."
)
TOP_FUNCTIONS = 10


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


def flame_graph(found: CpuProfile | None, title: str) -> Figure | None:
    """The run's flame graph as a Plotly figure; None without a profile or call chains."""
    if found is None or not found.folded:
        return None
    nodes = _nodes(found)
    ids = list(nodes)
    trace = {
        "type": "icicle",
        "ids": ids,
        "labels": [i.rsplit(";", 1)[-1] for i in ids],
        "parents": ["" if i == ROOT else i.rsplit(";", 1)[0] for i in ids],
        "values": [nodes[i] for i in ids],
        "branchvalues": "total",
        "tiling": {"orientation": "v", "flip": "y"},
        "hovertemplate": "%{label}<br>%{value} samples, %{percentRoot:.1%} of the run's CPU"
        "<extra></extra>",
        "marker": {"colorscale": "YlOrRd"},
        "maxdepth": 12,
    }
    layout = figure_layout(title, height=FLAME_HEIGHT_PX)
    layout["margin"] = {"l": 8, "r": 8, "t": 48, "b": 8}
    return {"data": [trace], "layout": layout}


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
