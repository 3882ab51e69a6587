"""Plotly figure specs for the report (pure: plain dicts of data and layout, no plotly import).

Each builder takes already-grouped series and returns ``{"data": [...], "layout": {...}}``, or
None when there is nothing to draw, so a chart appears only when its data is there. Every
trace of a group shares the group's colour and legend group: clicking a set in the legend
hides all of its lines in that chart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgdyno.catalogs.metrics import get

Figure = dict[str, Any]

# Up to 12 sets stay distinguishable; beyond that colours repeat (dash styles still differ).
PALETTE = (
    "#2f6db3",
    "#e08a1e",
    "#2e9e5b",
    "#c8453a",
    "#8a5fbf",
    "#8c6245",
    "#d46aa8",
    "#6b6b6b",
    "#a3a13a",
    "#2aa6b8",
    "#1c3d6e",
    "#b35a00",
)
GOOD, BAD, NEUTRAL = "#2e9e5b", "#c8453a", "#8a8a8a"


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Series:
    """One group's per-second values of one run: x in seconds from the start of the run."""

    group: str
    colour: str
    values: Mapping[str, Sequence[tuple[float, float]]]  # series name -> (x, y) points
    checkpoints: Sequence[Mapping[str, Any]] = field(default_factory=tuple)  # x0, x1, text
    devices: Sequence[tuple[str, str]] = ()  # (role, kernel name): data, then WAL if apart


def row_domains(weights: Sequence[float], gap: float) -> list[tuple[float, float]]:
    """(bottom, top) of each row of a chart, top row first, in paper fractions, `gap` apart.

    >>> row_domains([1.0, 1.0], 0.1)
    [(0.55, 1.0), (0.0, 0.45)]
    """
    usable = 1.0 - gap * (len(weights) - 1)
    total = sum(weights)
    out, top = [], 1.0
    for w in weights:
        bottom = max(top - usable * w / total, 0.0)
        out.append((round(bottom, 4), round(top, 4)))
        top = bottom - gap
    return out


LEGEND_TOP_PX = 38  # from the top of a chart to its legend, under the title


def figure_layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {
            "text": title,
            "x": 0,
            "xanchor": "left",
            "font": {"size": 15},
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": 12},
        },
        "margin": {"l": 64, "r": 16, "t": 72, "b": 56},
        "hovermode": "x unified",
        # Above the plots, under the title: never over an axis title, and no blank band
        # between the legend and the plot whatever the chart's height; one flowing row.
        "legend": {
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "traceorder": "normal",
            "yref": "container",
            "yanchor": "top",
        },
        "template": None,
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 12},
    }
    layout.update(extra)
    # Its top a fixed distance under the title, so that a legend that wraps grows downwards
    # (pushing the plots down) instead of up over the title.
    layout["legend"]["y"] = 1 - LEGEND_TOP_PX / float(layout.get("height") or 450)
    return layout


def axis_spec(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "gridcolor": "#e6e6e6", "zeroline": False, **extra}


def labelled(
    specs: Sequence[tuple[str, str, str, float]], prefix: str = "", device: str = ""
) -> list[tuple[str, str, str, str, float]]:
    """(metric, axis suffix, dash, width) -> (series name, legend label, ...): names and labels
    come from the metric catalog, a per-device metric filled in with `device`."""
    out = []
    for name, axis, dash, width in specs:
        metric = get(name)
        out.append((metric.named(device), prefix + metric.label, axis, dash, width))
    return out


def series_lines(
    series: Sequence[Series], specs: Sequence[tuple[str, str, str, str, float]]
) -> list[Any]:
    """Traces for every group and (series name, label, axis suffix, dash, width).

    With one group the legend names each line; with several it names each group once (the
    chart's note tells what the dash styles mean) so 12 sets still give a readable legend.
    """
    traces = []
    for s in series:
        for name, label, axis, dash, width in specs:
            points = s.values.get(name)
            if not points:
                continue
            single = len(series) == 1
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": label if single else s.group,
                    "legendgroup": s.group,
                    "showlegend": True,
                    "x": [p[0] for p in points],
                    "y": [p[1] for p in points],
                    "line": {"color": s.colour, "dash": dash, "width": width},
                    "xaxis": "x" + axis,
                    "yaxis": "y" + axis,
                    "hovertemplate": f"%{{y:.4~g}} {label}<extra>{s.group}</extra>",
                }
            )
    return traces


def legend_once(data: list[Any], single: bool) -> list[Any]:
    """With several groups, one legend entry per group: its first trace's."""
    if not single:
        seen: set[str] = set()
        for trace in data:
            trace["showlegend"] = trace["legendgroup"] not in seen
            seen.add(trace["legendgroup"])
    return data


def checkpoint_shapes(series: Sequence[Series]) -> tuple[list[Any], list[Any]]:
    """Checkpoints as shaded spans on the top row and markers that carry their details."""
    shapes, traces = [], []
    single = len(series) == 1
    for s in series:
        if not s.checkpoints:
            continue
        for c in s.checkpoints:
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "y domain",
                    "x0": c["x0"],
                    "x1": c["x1"],
                    "y0": 0,
                    "y1": 1,
                    "fillcolor": s.colour,
                    "opacity": 0.09,
                    "line": {"width": 0},
                    "layer": "below",
                }
            )
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "checkpoint" if single else s.group,
                "legendgroup": s.group,
                "showlegend": single,
                "x": [c["x0"] for c in s.checkpoints],
                "y": [1.0 for _ in s.checkpoints],
                "yaxis": "y3",
                "xaxis": "x",
                "marker": {"symbol": "triangle-down", "size": 9, "color": s.colour},
                "text": [c["text"] for c in s.checkpoints],
                "hovertemplate": "%{text}<extra>" + s.group + "</extra>",
            }
        )
    return shapes, traces


@dataclass(frozen=True)
class Point:
    """A group's figure at one x, with the spread of its repeats."""

    group: str
    colour: str
    x: float | str
    y: float
    low: float | None = None  # error bar ends, absolute
    high: float | None = None
    text: str = ""


def _errors(points: Sequence[Point]) -> dict[str, Any] | None:
    if not any(p.low is not None and p.high is not None for p in points):
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [max(p.high - p.y, 0) if p.high is not None else 0 for p in points],
        "arrayminus": [max(p.y - p.low, 0) if p.low is not None else 0 for p in points],
        "thickness": 1.2,
        "width": 4,
    }


def _by_group(points: Sequence[Point]) -> dict[str, list[Point]]:
    groups: dict[str, list[Point]] = {}
    for p in points:
        groups.setdefault(p.group, []).append(p)
    return groups


def tps_by_clients(points: Sequence[Point], title: str, unit: str = "TPS") -> Figure | None:
    """Mean throughput (TPS, or NOPM for TPC-C-like cells) with its 95% CI against clients, one
    line per group; bars with one client."""
    if not points:
        return None
    several = len({p.x for p in points}) > 1
    data = []
    for group, pts in _by_group(points).items():
        pts = sorted(pts, key=lambda p: float(p.x))
        trace: dict[str, Any] = {
            "name": group,
            "legendgroup": group,
            "x": [p.x for p in pts],
            "y": [p.y for p in pts],
            "text": [p.text for p in pts],
            "hovertemplate": f"%{{y:,.0f}} {unit} (%{{text}})<extra>{group}</extra>",
        }
        errors = _errors(pts)
        if errors:
            # On a bar, an error bar of the bar's own colour would vanish inside it.
            trace["error_y"] = {**errors, "color": pts[0].colour if several else "#333333"}
        if several:
            trace.update(type="scatter", mode="lines+markers", line={"color": pts[0].colour})
        else:
            trace.update(
                type="bar", marker={"color": pts[0].colour}, x=[group], textposition="none"
            )
        data.append(trace)
    xaxis = axis_spec("clients", type="log", dtick=0.30103) if several else axis_spec("")
    layout = figure_layout(
        title,
        height=420,
        xaxis=xaxis,
        yaxis=axis_spec(unit, rangemode="tozero"),
        hovermode="closest",
    )
    return {"data": data, "layout": layout}


def grouped_bars(
    points: Sequence[Point], title: str, value_title: str, *, horizontal: bool = False
) -> Figure | None:
    """One bar per group in each category: worst-case latency; statements (horizontal, as
    their text is long)."""
    if not points:
        return None
    value, category = ("x", "y") if horizontal else ("y", "x")
    data = []
    for group, pts in _by_group(points).items():
        trace: dict[str, Any] = {
            "type": "bar",
            "name": group,
            "legendgroup": group,
            "orientation": "h" if horizontal else "v",
            category: [p.x for p in pts],
            value: [p.y for p in pts],
            "text": [p.text for p in pts],
            "textposition": "none",
            "marker": {"color": pts[0].colour},
            "hovertemplate": f"%{{{value}:.3~f}} ms<br>%{{text}}<extra>{group}</extra>",
        }
        errors = _errors(pts)
        if errors:
            trace[f"error_{value}"] = {**errors, "color": "#444444"}
        data.append(trace)
    categories = len({p.x for p in points})
    groups = len(data)
    axes = {
        f"{value}axis": axis_spec(value_title, rangemode="tozero"),
        f"{category}axis": axis_spec("", automargin=True, autorange="reversed")
        if horizontal
        else axis_spec("", automargin=True),
    }
    height = 120 + categories * max(groups, 1) * 14 if horizontal else 400
    layout = figure_layout(
        title, height=max(height, 300), barmode="group", hovermode="closest", **axes
    )
    return {"data": data, "layout": layout}


@dataclass(frozen=True)
class Step:
    """One rung of a ladder, as percentages of the first step's throughput."""

    name: str
    level: float  # this step's level (the first is 100)
    low: float | None  # 95% interval of the level, from the cumulative change
    high: float | None
    gain_text: str  # the step's own change with its CI, for the hover


GREYED = "#c4c4c4"  # the bars of a ladder not judged (its runs were flagged)


def waterfall(
    steps: Sequence[Step], total_text: str, title: str, unit: str = "TPS", *, greyed: bool = False
) -> Figure | None:
    """Baseline bar at 100, each step floating from the previous level, then the total;
    `greyed`: every bar grey and hatched, for a ladder drawn from runs that were not judged."""
    if len(steps) < 2:
        return None
    names, bases, heights, colours, texts = [], [], [], [], []
    upper, lower = [], []
    previous = steps[0].level
    for i, step in enumerate(steps):
        names.append(step.name)
        if i == 0:
            bases.append(0.0)
            heights.append(step.level)
            colours.append(NEUTRAL)
        else:
            bases.append(min(previous, step.level))
            heights.append(abs(step.level - previous))
            colours.append(GOOD if step.level >= previous else BAD)
        top = bases[-1] + heights[-1]
        upper.append(max(step.high - top, 0) if step.high is not None else 0)
        lower.append(max(top - step.low, 0) if step.low is not None else 0)
        texts.append(f"{step.level:.1f}% of {steps[0].name}; step: {step.gain_text}")
        previous = step.level
    last = steps[-1]
    names.append("total")
    bases.append(0.0)
    heights.append(last.level)
    colours.append(GOOD if last.level >= steps[0].level else BAD)
    upper.append(max(last.high - last.level, 0) if last.high is not None else 0)
    lower.append(max(last.level - last.low, 0) if last.low is not None else 0)
    texts.append(f"{last.level:.1f}% of {steps[0].name}: {total_text}")
    marker: dict[str, Any] = {"color": colours}
    if greyed:
        marker = {"color": GREYED, "pattern": {"shape": "/", "fgcolor": "#8a8a8a", "size": 8}}
    low_end = min(bases[1:-1])
    high_end = max(b + h + u for b, h, u in zip(bases, heights, upper, strict=True))
    data = [
        {
            "type": "bar",
            "x": names,
            "y": heights,
            "base": bases,
            "marker": marker,
            "text": texts,
            "textposition": "none",
            "showlegend": False,
            "hovertemplate": "%{text}<extra></extra>",
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": upper,
                "arrayminus": lower,
                "color": "#333333",
                "thickness": 1.2,
                "width": 6,
            },
        }
    ]
    layout = figure_layout(
        title,
        height=420,
        xaxis=axis_spec(""),
        yaxis=axis_spec(
            f"% of the first step's {unit}", range=[max(0.0, low_end * 0.9), high_end * 1.03]
        ),
        hovermode="closest",
    )
    return {"data": data, "layout": layout}


@dataclass(frozen=True)
class Curve:
    """One group's latency-throughput curve: (achieved rate, p50, p95, p99) points in rate
    order (p95 None where it was not measured: a gap in its line), and its knee (achieved
    rate, p99) when one was found."""

    group: str
    colour: str
    points: Sequence[tuple[float, float, float | None, float]]
    knee: tuple[float, float] | None = None


# The percentile lines of a curve: (index in a point, label, dash, width).
_PERCENTILES = ((3, "p99", "solid", 2.4), (2, "p95", "dash", 1.6), (1, "p50", "dot", 1.6))


def latency_throughput(curves: Sequence[Curve], target_ms: float, title: str) -> Figure | None:
    """p50/p95/p99 against the achieved rate, one colour per group (the dash tells the
    percentile), the latency target as a horizontal line and each group's knee marked.

    >>> fig = latency_throughput([Curve("a", "#000", [(100, .1, .2, .3), (200, .1, .3, .9)],
    ...                                 (100, .3))], 0.5, "t")
    >>> [t["name"] for t in fig["data"]], fig["data"][-1]["y"]
    (['a p99', 'a p95', 'a p50', 'a knee', 'p99 target 0.5 ms'], [0.5, 0.5])
    >>> latency_throughput([], 1.0, "t") is None
    True
    """
    if not any(c.points for c in curves):
        return None
    data: list[Any] = []
    for c in curves:
        x = [p[0] for p in c.points]
        for index, label, dash, width in _PERCENTILES:
            data.append({
                "type": "scatter", "mode": "lines+markers", "name": f"{c.group} {label}",
                "legendgroup": c.group, "x": x, "y": [p[index] for p in c.points],
                "line": {"color": c.colour, "dash": dash, "width": width},
                "marker": {"size": 5, "color": c.colour},
                "hovertemplate": f"%{{y:.3~g}} ms {label} at %{{x:,.0f}} tx/s<extra>{c.group}"
                                 "</extra>",
            })  # fmt: skip
        if c.knee is not None:
            data.append({
                "type": "scatter", "mode": "markers", "name": f"{c.group} knee",
                "legendgroup": c.group, "x": [c.knee[0]], "y": [c.knee[1]],
                "marker": {"symbol": "x", "size": 13, "color": c.colour,
                           "line": {"width": 1, "color": "#000000"}},
                "hovertemplate": "knee: p99 %{y:.3~g} ms at %{x:,.0f} tx/s<extra>"
                                 f"{c.group}</extra>",
            })  # fmt: skip
    # A trace rather than a shape: on a log axis a shape's y would want the log of the value.
    top = max(p[0] for c in curves for p in c.points)
    data.append({
        "type": "scatter", "mode": "lines", "name": f"p99 target {target_ms:g} ms",
        "x": [0, top], "y": [target_ms, target_ms], "line": {"color": BAD, "dash": "dash"},
        "hovertemplate": f"p99 target {target_ms:g} ms<extra></extra>",
    })  # fmt: skip
    layout = figure_layout(
        title, height=460, hovermode="closest",
        xaxis=axis_spec("achieved rate (tx/s)", rangemode="tozero"),
        yaxis=axis_spec("latency from the scheduled start (ms)", type="log"),
    )  # fmt: skip
    return {"data": data, "layout": layout}
