"""`pgdyno tune` on the terminal and as JSON: current -> recommended, with why."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from pgdyno.records.tune import TuneFacts
from pgdyno.tune.model import GROUPS, LAYERS, ApplyReport, Configuration, Setting

_LAYER_TITLES = {
    "postgresql": "PostgreSQL",
    "host": "host (kernel)",
    "device": "block devices under the data and WAL directories",
}
_GROUP_TITLES = {
    "observability": "observability (logging and I/O timing; --no-observability leaves them out)",
}
_STATUS_NOTES = {
    "measure": "measure first (tune --verify --ladder)",
    "review": "review: only on a dedicated host",
    "todo": "to do on the server's host",
    "host": "for the host's administrator: the server runs in a container",
}


def setting_data(setting: Setting) -> dict[str, Any]:
    return {
        "layer": setting.layer,
        "name": setting.name,
        "device": setting.device,
        "current": setting.current,
        "recommended": setting.value,
        "changes": setting.changes,
        "status": setting.status,
        "group": setting.group,
        "takes_effect": setting.takes_effect,
        "why": setting.why,
        "rules": list(setting.rules),
        "evidence": list(setting.evidence),
    }


def configuration_data(config: Configuration, target: str) -> dict[str, Any]:
    return {
        "source": config.source,
        "profile": config.profile,
        "target": target,
        "facts": facts_data(config.facts),
        "unknown": config.unknown,
        "notes": list(config.notes),
        "settings": [setting_data(s) for s in config.settings],
    }


def baseline_data(
    name: str, values: Mapping[str, str | int | float], config: Configuration | None
) -> dict[str, Any]:
    """`{"baseline": ..., "settings": {name: value}}` with each value as the tool writes it;
    the values the target refuses (the server's pg_settings, or offline the recorded ones of
    its version) are named under `left_out` with the reason, as the table's notes name them."""
    data: dict[str, Any] = {"baseline": name, "settings": dict(values)}
    if config is not None:
        kept = {s.name for s in config.settings}
        left = [n for n in values if n not in kept]
        if left:
            data["left_out"] = {
                n: next((note for note in config.notes if f" {n} = " in note), "refused")
                for n in left
            }
    return data


def facts_data(facts: TuneFacts) -> dict[str, Any]:
    """The facts as `tune --json` prints them: the known `t` facts in the record's order, each
    disk's `device` facts by name, and where each known fact came from."""
    return {
        **{name: _plain(value) for name, value in facts.known().items()},
        "devices": {
            disk.name: {name: _plain(value) for name, value in disk.scope().items()}
            for disk in facts.devices
        },
        "sources": dict(facts.sources),
    }


def _plain(value: object) -> object:
    """A tuple of offered values as a JSON list."""
    return list(value) if isinstance(value, tuple) else value


def render_configuration(config: Configuration, target: str) -> Iterator[RenderableType]:
    changing = sum(1 for s in config.settings if s.changes and s.status == "apply")
    yield Text.from_markup(
        f"[bold]pgdyno tune[/bold] ({config.source}, profile {config.profile}) for {target}: "
        f"{changing} setting(s) to change"
    )
    for layer in LAYERS:
        for group in GROUPS:
            rows = [s for s in config.layer(layer) if s.group == group]
            if rows:
                yield _table(_title(layer, group), rows)
    for fact, why in config.unknown.items():
        yield Text(f"unknown: {fact}: {why}", style="yellow")
    for note in config.notes:
        yield Text(f"note: {note}", style="yellow")


def _title(layer: str, group: str) -> str:
    if group == "performance":
        return _LAYER_TITLES[layer]
    return f"{_LAYER_TITLES[layer]}: {_GROUP_TITLES[group]}"


def _table(title: str, rows: list[Setting]) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("setting", no_wrap=True)
    table.add_column("current", no_wrap=True)
    table.add_column("recommended", no_wrap=True)
    table.add_column("takes effect")
    table.add_column("why", ratio=1)
    for s in rows:
        name = f"{s.name} ({s.device})" if s.device else s.name
        current = "?" if s.current is None else s.current
        mark = "=" if not s.changes else "->"
        why = s.why
        if s.status != "apply":
            why = f"[{_STATUS_NOTES[s.status]}] {why}"
        if s.rules:
            why += f" (doctor: {', '.join(s.rules)})"
        style = None if s.changes else "dim"
        table.add_row(name, current, f"{mark} {s.value}", s.takes_effect, why, style=style)
    return table


def apply_data(report: ApplyReport) -> dict[str, Any]:
    return {
        "applied": [
            {
                "layer": d.layer,
                "name": d.name,
                "device": d.device,
                "old": d.old,
                "requested": d.requested,
                "effective": d.effective,
                "waiting_for_restart": d.waiting_for_restart,
                "took_effect": d.took_effect,
            }
            for d in report.done
        ],
        "unchanged": report.unchanged,
        "restarts": report.restarted,
        "notes": report.notes,
    }


def render_apply(report: ApplyReport, target: str) -> Iterator[RenderableType]:
    table = Table(title=f"applied to {target} (journalled: `pgdyno rollback` undoes it)",
                  title_justify="left")  # fmt: skip
    for column in ("layer", "setting", "was", "requested", "in effect"):
        table.add_column(column)
    for d in report.done:
        name = f"{d.name} ({d.device})" if d.device else d.name
        effect = d.effective or "?"
        if d.waiting_for_restart:
            effect += " (waits for a restart)"
        style = None if d.took_effect else "yellow"
        table.add_row(d.layer, name, d.old or "", d.requested, effect, style=style)
    yield table
    if report.unchanged:
        yield Text(f"already as recommended: {', '.join(report.unchanged)}", style="dim")
    for note in report.notes:
        yield Text(f"note: {note}", style="yellow")
