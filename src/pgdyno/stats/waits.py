"""Wait-event tallies to per-second series and a run's profile, and profiles compared (pure).

Average active sessions (AAS) of an event over a second: the sessions found in it, summed over
the looks of that second, divided by the looks. The profile's shares are of the client
backends' active samples (their database time); background processes are reported apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pgdyno.records.run import Sample
from pgdyno.records.waits import BackgroundWait, WaitProfile, WaitShare, event_type

CLIENT = ""  # the process kind of client backends in a tally
TOP_EVENTS = 20  # events kept in a run's profile; the rest add up to `other`
TOP_BACKGROUND = 10
CLIENT_SERIES = "waits.{type}_aas"  # per second, client backends, one series per type seen
BACKGROUND_SERIES = "waits_bg.{type}_aas"  # the same for the background processes
EVENT_SERIES = "waits_event.{event}_aas"  # client backends, for each of the run's top events
TOP_EVENT_SERIES = 5

MIN_MOVE = 0.0005  # a move below 0.05 points of database time is rounding, not a change
Counts = Mapping[int, Mapping[tuple[str, str], int]]  # second -> (process, event) -> found


def series_name(wait_type: str, background: bool = False) -> str:
    """
    >>> series_name("LWLock"), series_name("IO", background=True)
    ('waits.LWLock_aas', 'waits_bg.IO_aas')
    """
    return (BACKGROUND_SERIES if background else CLIENT_SERIES).format(type=wait_type)


def wait_type_of(series: str) -> tuple[str, bool] | None:
    """The wait type and whether it is the background's, of a series name; None for others.

    >>> wait_type_of("waits.CPU*_aas"), wait_type_of("waits_bg.IO_aas"), wait_type_of("tps")
    (('CPU*', False), ('IO', True), None)
    """
    for prefix, background in (("waits.", False), ("waits_bg.", True)):
        if series.startswith(prefix) and series.endswith("_aas"):
            return series[len(prefix) : -len("_aas")], background
    return None


def event_series_name(event: str) -> str:
    """
    >>> event_series_name("LWLock:WALWrite")
    'waits_event.LWLock:WALWrite_aas'
    """
    return EVENT_SERIES.format(event=event)


def top_event_samples(
    ticks: Mapping[int, float], counts: Counts, events: Sequence[str]
) -> list[Sample]:
    """AAS per second of each of `events` (the run's top client events), 0 when not seen.

    >>> top_event_samples({7: 10.0}, {7: {("", "IO:WalSync"): 4}}, ["IO:WalSync", "CPU*"])
    [(7, 'waits_event.IO:WalSync_aas', 0.4), (7, 'waits_event.CPU*_aas', 0.0)]
    """
    out: list[Sample] = []
    for t in sorted(ticks):
        looks = ticks[t]
        if looks <= 0:
            continue
        found = counts.get(t, {})
        for event in events:
            out.append((t, event_series_name(event), found.get((CLIENT, event), 0) / looks))
    return out


def second_samples(ticks: Mapping[int, float], counts: Counts) -> list[Sample]:
    """AAS per wait type and second, client backends and background processes apart.

    Every type seen in the run gets a value in every second that was looked at (0 when it was
    not seen then), so that stacked charts and CSV columns have no holes. (The run's top events
    get series of their own: `top_event_samples`.)

    >>> ticks = {10: 10.0, 11: 10.0}
    >>> counts = {10: {("", "CPU*"): 20, ("", "IO:WalSync"): 5}, 11: {("", "CPU*"): 30}}
    >>> second_samples(ticks, counts)
    [(10, 'waits.CPU*_aas', 2.0), (10, 'waits.IO_aas', 0.5), (11, 'waits.CPU*_aas', 3.0), (11, 'waits.IO_aas', 0.0)]
    """  # noqa: E501
    seen = sorted({(p != CLIENT, event_type(e)) for c in counts.values() for p, e in c})
    out: list[Sample] = []
    for t in sorted(ticks):
        looks = ticks[t]
        if looks <= 0:
            continue
        by_type: Counter[tuple[bool, str]] = Counter()
        for (process, event), n in counts.get(t, {}).items():
            by_type[(process != CLIENT, event_type(event))] += n
        for background, wait_type in seen:
            value = by_type.get((background, wait_type), 0) / looks
            out.append((t, series_name(wait_type, background), float(value)))
    return out


@dataclass(frozen=True)
class Tally:
    """A run's looks and sessions found, summed over its seconds."""

    looks: float
    client: Counter[str]  # event -> sessions found
    background: Counter[tuple[str, str]]  # (process, event) -> sessions found


def summed(ticks: Mapping[int, float], counts: Counts) -> Tally:
    client: Counter[str] = Counter()
    background: Counter[tuple[str, str]] = Counter()
    for per_second in counts.values():
        for (process, event), n in per_second.items():
            if process == CLIENT:
                client[event] += n
            else:
                background[(process, event)] += n
    return Tally(sum(ticks.values()), client, background)


def profile(
    ticks: Mapping[int, float], counts: Counts, source: str, hz: float
) -> WaitProfile | None:
    """The run's wait profile; None when nothing was looked at.

    >>> p = profile({1: 10.0}, {1: {("", "CPU*"): 30, ("", "LWLock:WALWrite"): 10,
    ...                             ("checkpointer", "IO:DataFileSync"): 5}},
    ...             "pg_stat_activity", 10.0)
    >>> p.db_time_s, p.by_type, [(w.event, w.share, w.aas) for w in p.top]
    (4.0, (('CPU*', 0.75), ('LWLock', 0.25)), [('CPU*', 0.75, 3.0), ('LWLock:WALWrite', 0.25, 1.0)])
    >>> p.background
    (BackgroundWait(process='checkpointer', event='IO:DataFileSync', aas=0.5),)
    """
    tally = summed(ticks, counts)
    if tally.looks <= 0:
        return None
    active = sum(tally.client.values())
    by_type: Counter[str] = Counter()
    for event, n in tally.client.items():
        by_type[event_type(event)] += n
    ranked = tally.client.most_common()
    top = tuple(WaitShare(event, n / active, n / tally.looks) for event, n in ranked[:TOP_EVENTS])
    other = sum(n for _, n in ranked[TOP_EVENTS:]) / active if active else 0.0
    background = tuple(
        BackgroundWait(process, event, n / tally.looks)
        for (process, event), n in tally.background.most_common(TOP_BACKGROUND)
    )
    return WaitProfile(
        source=source,
        sample_hz=hz,
        samples=round(tally.looks),
        db_time_s=active / hz,
        by_type=tuple((t, n / active) for t, n in by_type.most_common()) if active else (),
        top=top,
        other=other,
        background=background,
    )


@dataclass(frozen=True)
class WaitChange:
    """An event whose share of database time moved between two sets of runs."""

    event: str
    before: float  # share in the baseline's runs, 0..1
    after: float

    def text(self) -> str:
        """
        >>> WaitChange("LWLock:WALWrite", 0.31, 0.09).text()
        'LWLock:WALWrite 31% -> 9%'
        """
        return f"{self.event} {self.before:.0%} -> {self.after:.0%}"


def pooled(profiles: Iterable[WaitProfile]) -> dict[str, float]:
    """Each event's share of the database time of several runs, weighted by their db time.

    >>> a = WaitProfile("x", 10, 10, 2.0, (), (WaitShare("CPU*", 1.0, 2.0),))
    >>> b = WaitProfile("x", 10, 10, 6.0, (), (WaitShare("CPU*", 0.5, 3.0),
    ...                                        WaitShare("IO:WalSync", 0.5, 3.0)))
    >>> pooled([a, b])
    {'CPU*': 0.625, 'IO:WalSync': 0.375}
    """
    time: dict[str, float] = {}
    total = 0.0
    for p in profiles:
        total += p.db_time_s
        for w in p.top:
            time[w.event] = time.get(w.event, 0.0) + w.share * p.db_time_s
    return {event: t / total for event, t in time.items()} if total > 0 else {}


def largest_changes(
    before: Sequence[WaitProfile], after: Sequence[WaitProfile], n: int = 3
) -> tuple[WaitChange, ...]:
    """The `n` events whose pooled share of database time moved most (by at least MIN_MOVE),
    largest move first; () when either side has no profile.

    >>> a = [WaitProfile("x", 10, 10, 2.0, (), (WaitShare("CPU*", 0.69, 1.4),
    ...                                         WaitShare("LWLock:WALWrite", 0.31, 0.6)))]
    >>> b = [WaitProfile("x", 10, 10, 2.0, (), (WaitShare("CPU*", 0.91, 1.8),
    ...                                         WaitShare("LWLock:WALWrite", 0.09, 0.2)))]
    >>> [c.text() for c in largest_changes(a, b)]
    ['CPU* 69% -> 91%', 'LWLock:WALWrite 31% -> 9%']
    >>> largest_changes(a, a)  # the same shares: no change to tell, whatever the float noise
    ()
    """
    shares_a, shares_b = pooled(before), pooled(after)
    if not shares_a or not shares_b:
        return ()
    events = set(shares_a) | set(shares_b)
    moved = sorted(
        events,
        key=lambda e: (-abs(shares_b.get(e, 0.0) - shares_a.get(e, 0.0)), e),
    )
    return tuple(
        WaitChange(e, shares_a.get(e, 0.0), shares_b.get(e, 0.0))
        for e in moved[:n]
        if abs(shares_a.get(e, 0.0) - shares_b.get(e, 0.0)) >= MIN_MOVE
    )
