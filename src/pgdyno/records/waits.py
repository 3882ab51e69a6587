"""A run's wait-event profile: where the server's sessions spent their time (collect/waits.py
samples it, stats/waits.py sums it up).

An event is named ``TYPE:NAME`` as pg_stat_activity shows it (``LWLock:WALWrite``,
``IO:DataFileRead``), or ``CPU*`` for an active session with no wait event: on CPU, or in a
code path PostgreSQL does not instrument (the star says it may be either).
"""

from __future__ import annotations

from dataclasses import dataclass

CPU = "CPU*"


def event_type(event: str) -> str:
    """The wait event type of an event name.

    >>> event_type("LWLock:WALWrite"), event_type("CPU*")
    ('LWLock', 'CPU*')
    """
    return event.split(":", 1)[0]


@dataclass(frozen=True, slots=True)
class WaitShare:
    """One wait event over a run: its share of the sampled time, and its average active
    sessions (the sessions found in it on an average sample)."""

    event: str
    share: float  # 0..1 of the group's active samples
    aas: float


@dataclass(frozen=True, slots=True)
class BackgroundWait:
    """One wait event of one kind of background process (checkpointer, walwriter, ...)."""

    process: str  # pg_stat_activity.backend_type
    event: str
    aas: float


@dataclass(frozen=True, slots=True)
class WaitProfile:
    """The wait profile of a run's client backends (its database time), and what the server's
    background processes were doing beside them.

    `samples` is how many times the sessions were looked at; `db_time_s` the session-seconds
    the client backends were active (samples x sessions found / sample rate). Shares add up
    to 1 over `by_type`, and over `top` with its `other` share.
    """

    source: str  # "pg_stat_activity" or "pg_wait_sampling"
    sample_hz: float
    samples: int
    db_time_s: float
    by_type: tuple[tuple[str, float], ...]  # (type, share), largest first
    top: tuple[WaitShare, ...]  # largest first
    other: float = 0.0  # the share of the events not in `top`
    background: tuple[BackgroundWait, ...] = ()  # largest first

    def share(self, event: str) -> float:
        """An event's share of the database time (0 when it was never seen in `top`)."""
        return next((w.share for w in self.top if w.event == event), 0.0)
