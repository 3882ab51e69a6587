"""A run's wait-event profile as terminal tables: `runs show ID --waits` (pure)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from pgdyno.catalogs.wait_events import describe_event
from pgdyno.formatting import fmt
from pgdyno.records.waits import WaitProfile
from pgdyno.textsafe import safe_text

MEANING_MIN_SHARE = 0.05  # the events worth a line of explanation under the table


def _pct(share: float) -> str:
    return f"{100.0 * share:.1f}"


def source_text(found: WaitProfile) -> str:
    """
    >>> source_text(WaitProfile("pg_stat_activity", 10.0, 600, 95.2, (), ()))
    'pg_stat_activity at 10 Hz, 600 samples, 95.2 s of database time'
    """
    return (
        f"{found.source} at {found.sample_hz:g} Hz, {found.samples:,} samples, "
        f"{found.db_time_s:,.1f} s of database time"
    )


def _meanings(found: WaitProfile) -> list[RenderableType]:
    """One line for each of the top events that data/wait_events.toml describes."""
    lines = [
        f"{w.event}: {text}"
        for w in found.top
        if w.share >= MEANING_MIN_SHARE and (text := describe_event(w.event)) is not None
    ]
    return [Text(safe_text(line)) for line in lines]


def waits_tables(run_id: int, found: WaitProfile) -> list[RenderableType]:
    """The client backends' top events (with the rest as `other`, so the shares add up to
    100%), their wait types, and the background processes' busiest events."""
    top = Table(
        title=f"run {run_id} wait events: {source_text(found)}", title_justify="left",
        caption="CPU*: active with no wait event (on CPU, or in code PostgreSQL does not "
        "instrument); AAS: average active sessions",
    )  # fmt: skip
    for name in ("event", "% of DB time", "AAS"):
        top.add_column(name, justify="left" if name == "event" else "right")
    for w in found.top:
        top.add_row(w.event, _pct(w.share), fmt(w.aas, 2))
    if found.other > 0:
        top.add_row("(other events)", _pct(found.other), "")
    types = Table(title="by wait type", title_justify="left")
    for name in ("type", "% of DB time"):
        types.add_column(name, justify="left" if name == "type" else "right")
    for wait_type, share in found.by_type:
        types.add_row(wait_type, _pct(share))
    tables: list[RenderableType] = [top, *_meanings(found), types]
    if found.background:
        background = Table(title="background processes (not in DB time)", title_justify="left")
        for name in ("process", "event", "AAS"):
            background.add_column(name, justify="right" if name == "AAS" else "left")
        for b in found.background:
            background.add_row(b.process, b.event, fmt(b.aas, 2))
        tables.append(background)
    return tables
