"""The per-second charts of a run or a cell (pure Plotly specs): TPS and latency, disk I/O per
device, CPU and memory; every one on the same seconds (`time_range`), each figure drawn at the
end of the second it covers (report/series.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgdyno.catalogs.metrics import get
from pgdyno.report.charts import (
    Figure,
    Series,
    axis_spec,
    checkpoint_shapes,
    figure_layout,
    labelled,
    legend_once,
    row_domains,
    series_lines,
)


def _unit(name: str) -> str:
    return get(name).unit


def time_range(series: Sequence[Series]) -> list[float] | None:
    """The seconds every timeline of these runs spans: from the start of the first measured
    second to the end of the last one any series (or checkpoint) reaches, so that the charts
    of a cell line up and none stops before the run's last measured second."""
    ends = [p[0] for s in series for points in s.values.values() for p in points]
    ends += [float(c[k]) for s in series for c in s.checkpoints for k in ("x0", "x1")]
    return [0.0, max(ends)] if ends else None


def _two_rows(
    title: str, top: str, bottom: str, seconds: list[float] | None, **bottom_extra: Any
) -> dict[str, Any]:
    span = {} if seconds is None else {"range": seconds}
    return figure_layout(
        title,
        height=560,
        xaxis=axis_spec("", anchor="y", showticklabels=False, matches="x2", **span),
        yaxis=axis_spec(top, domain=[0.55, 1.0], rangemode="tozero"),
        xaxis2=axis_spec("seconds into the run", anchor="y2", **span),
        yaxis2=axis_spec(bottom, domain=[0.0, 0.45], **bottom_extra),
    )


def tps_latency(series: Sequence[Series], title: str) -> Figure | None:
    """TPS on top; p50 (dotted), p99 (solid) and max (dashed) latency below, log scale."""
    data = series_lines(series, labelled([("tps", "", "solid", 1.8)]))
    if not data:
        return None
    data += series_lines(
        series,
        labelled(
            [
                ("latency_p50_ms", "2", "dot", 1.4),
                ("latency_p99_ms", "2", "solid", 1.6),
                ("latency_max_ms", "2", "dash", 1.0),
            ]
        ),
    )
    shapes, markers = checkpoint_shapes(series)
    top, bottom = get("tps").label, f"latency {_unit('latency_p99_ms')} (log)"
    layout = _two_rows(title, top, bottom, time_range(series), type="log", dtick=1)
    if markers:
        layout["yaxis3"] = {"overlaying": "y", "range": [0, 1.05], "visible": False}
        layout["shapes"] = shapes
    return {"data": legend_once(data, len(series) == 1) + markers, "layout": layout}


DISK_SPECS = (("disk.{device}.write_mbps", "solid", 1.6), ("disk.{device}.read_mbps", "dot", 1.6))


def device_labels(series: Sequence[Series]) -> dict[str, str]:
    """Each group's legend name on the disk chart: with its devices when the groups' devices
    differ (a comparison of filesystems or disks), else the group alone.

    >>> a = Series("xfs", "#000", {}, devices=(("data", "loop0"),))
    >>> b = Series("ext4", "#111", {}, devices=(("data", "loop1"), ("wal", "loop2")))
    >>> device_labels([a, b])
    {'xfs': 'xfs (data loop0)', 'ext4': 'ext4 (data loop1, WAL loop2)'}
    >>> device_labels([a, Series("again", "#222", {}, devices=(("data", "loop0"),))])
    {'xfs': 'xfs', 'again': 'again'}
    """
    layouts = {tuple(s.devices) for s in series}
    if len(layouts) <= 1:
        return {s.group: s.group for s in series}
    return {
        s.group: f"{s.group} ("
        + ", ".join(f"{'WAL' if role == 'wal' else role} {name}" for role, name in s.devices)
        + ")"
        for s in series
    }


def _disk_row(series: Sequence[Series], role: str, axis: str) -> list[Any]:
    """Each group's read and write lines on its own device of `role`."""
    names = device_labels(series)
    data: list[Any] = []
    for s in series:
        name = dict(s.devices).get(role)
        if name is None:
            continue
        specs = [(metric, axis, dash, width) for metric, dash, width in DISK_SPECS]
        traces = series_lines([s], labelled(specs, f"{role} ", name))
        if len(series) > 1:
            for trace in traces:
                trace["name"] = names[s.group]
        data += traces
    return data


def disk_io(series: Sequence[Series], title: str) -> Figure | None:
    """Read (dotted) and write (solid) MB/s, one row per role (data, then WAL when apart): each
    group on the device its own run used, named in the legend when the groups' devices differ,
    so that a comparison of filesystems or disks draws every set."""
    roles: list[str] = []
    data: list[Any] = []
    for role in ("data", "wal"):  # a row per role that some group has figures of
        traces = _disk_row(series, role, "" if not roles else "2")
        if traces:
            roles.append(role)
            data += traces
    if not data:
        return None
    unit = _unit("disk.{device}.write_mbps")
    titles = [_disk_axis_title(series, role, unit) for role in roles]
    seconds = time_range(series)
    if len(roles) == 1:
        layout = figure_layout(
            title,
            height=380,
            xaxis=axis_spec("seconds into the run", **({"range": seconds} if seconds else {})),
            yaxis=axis_spec(titles[0], rangemode="tozero"),
        )
    else:
        layout = _two_rows(title, titles[0], titles[1], seconds, rangemode="tozero")
    return {"data": legend_once(data, len(series) == 1), "layout": layout}


def _disk_axis_title(series: Sequence[Series], role: str, unit: str) -> str:
    names = {dict(s.devices).get(role) for s in series} - {None}
    what = "WAL" if role == "wal" else role
    return f"{what} device {names.pop()} {unit}" if len(names) == 1 else f"{what} device {unit}"


CPU_SPECS = (
    ("cpu.user_pct", "solid", 1.6),
    ("cpu.system_pct", "dash", 1.4),
    ("cpu.iowait_pct", "dot", 1.6),
    ("cpu.steal_pct", "dashdot", 1.0),
)
MEMORY_SPECS = (("mem.dirty_mb", "solid", 1.6), ("mem.writeback_mb", "dot", 1.6))
SMALL_MULTIPLE_PX, SMALL_MULTIPLE_GAP_PX = 150, 28


def cpu_memory(series: Sequence[Series], title: str) -> Figure | None:
    """CPU user / system / iowait / steal % and Dirty and Writeback MB. One group: CPU on top,
    memory below. Several: small multiples, one row per group (CPU on the left, memory on the
    right, every row on the same scales), so that five sets do not pile 20 lines on one plot."""
    if len(series) > 1:
        return _cpu_memory_rows(series, title)
    data = series_lines(series, labelled([(m, "", d, w) for m, d, w in CPU_SPECS]))
    memory = series_lines(series, labelled([(m, "2", d, w) for m, d, w in MEMORY_SPECS]))
    if not data and not memory:
        return None
    top, bottom = f"CPU {_unit('cpu.user_pct')}", f"memory {_unit('mem.dirty_mb')}"
    layout = _two_rows(title, top, bottom, time_range(series), rangemode="tozero")
    layout["yaxis"]["range"] = [0, 100]
    return {"data": legend_once(data + memory, True), "layout": layout}


def _cpu_memory_rows(series: Sequence[Series], title: str) -> Figure | None:
    cpu_names = [get(m).named("") for m, _, _ in CPU_SPECS]
    memory_names = [get(m).named("") for m, _, _ in MEMORY_SPECS]
    rows = [s for s in series if any(s.values.get(n) for n in cpu_names + memory_names)]
    if not rows:
        return None
    seconds = time_range(rows)
    span = {} if seconds is None else {"range": seconds}
    top = max((p[1] for s in rows for n in memory_names for p in s.values.get(n, ())), default=0)
    height = 128 + SMALL_MULTIPLE_PX * len(rows)
    layout = figure_layout(title, height=height)
    data: list[Any] = []
    domains = row_domains([1.0] * len(rows), SMALL_MULTIPLE_GAP_PX / (height - 128))
    for i, (s, domain) in enumerate(zip(rows, domains, strict=True)):
        cpu, mem = ("", "2") if i == 0 else (str(2 * i + 1), str(2 * i + 2))
        last = i == len(rows) - 1
        for axis, column in ((cpu, [0.0, 0.6]), (mem, [0.68, 1.0])):
            shared = {} if axis == "" else {"matches": "x"}
            layout[f"xaxis{axis}"] = axis_spec(
                "seconds into the run" if last else "", anchor=f"y{axis}", domain=column,
                showticklabels=last, **shared, **span,
            )  # fmt: skip
        group = s.group if len(s.group) <= 24 else s.group[:23] + "…"
        layout[f"yaxis{cpu}"] = axis_spec(
            f"{group}<br>CPU {_unit('cpu.user_pct')}", domain=list(domain), range=[0, 100],
            anchor=f"x{cpu}",
        )  # fmt: skip
        layout[f"yaxis{cpu}"]["title"]["font"] = {"color": s.colour}
        layout[f"yaxis{mem}"] = axis_spec(
            f"memory {_unit('mem.dirty_mb')}", domain=list(domain), rangemode="tozero",
            anchor=f"x{mem}", **({"range": [0, top * 1.05]} if top else {}),
        )  # fmt: skip
        lines = series_lines([s], labelled([(m, cpu, d, w) for m, d, w in CPU_SPECS]))
        lines += series_lines([s], labelled([(m, mem, d, w) for m, d, w in MEMORY_SPECS]))
        for trace in lines:  # the legend names the lines; the row's title names the group
            trace.update(legendgroup=trace["name"], showlegend=i == 0)
        data += lines
    return {"data": data, "layout": layout}
