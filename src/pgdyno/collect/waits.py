"""The wait-event sampler: what the server's sessions are doing, several times a second.

No extension is needed: pg_stat_activity is read in the timeline sampler's own connection, one
statement a look (postgres/queries/wait_sample.sql), `hz` times a second on the sampler's
thread. When pg_wait_sampling is installed in the benchmark database (and loaded), its profile,
sampled every 10 ms inside the server, is read once a second instead and the source says so.

Both give the same tally: per wall-clock second, how many looks were taken and how many
sessions were found in each (process kind, event); stats/waits.py turns it into per-second
average active sessions and the run's profile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pgdyno.errors import QueryRefused
from pgdyno.postgres.client import Client
from pgdyno.postgres.queries import load

DEFAULT_HZ = 10
MAX_HZ = 50
SOURCE_ACTIVITY = "pg_stat_activity"
SOURCE_EXTENSION = "pg_wait_sampling"

Key = tuple[str, str]  # (process kind: "" for client backends, else backend_type; event)


@dataclass
class WaitTally:
    """Per epoch second: looks taken (`ticks`, fractional for pg_wait_sampling's periods) and
    sessions found per (process, event)."""

    source: str
    hz: float
    ticks: dict[int, float] = field(default_factory=dict)
    counts: dict[int, Counter[Key]] = field(default_factory=dict)

    def add(self, second: int, looks: float, found: Counter[Key]) -> None:
        self.ticks[second] = self.ticks.get(second, 0.0) + looks
        self.counts.setdefault(second, Counter()).update(found)


def _counted(rows: list[tuple[object, ...]]) -> Counter[Key]:
    """Rows of (process, event, sessions) as a Counter; malformed rows are skipped.

    >>> _counted([("", "CPU*", 3), ("checkpointer", "IO:DataFileSync", 1), ("", None, 2)])
    Counter({('', 'CPU*'): 3, ('checkpointer', 'IO:DataFileSync'): 1})
    """
    found: Counter[Key] = Counter()
    for process, event, sessions in rows:
        if isinstance(process, str) and isinstance(event, str) and isinstance(sessions, int):
            found[(process, event)] += sessions
    return found


class WaitSampler:
    """Looks at pg_stat_activity `hz` times a second through the timeline sampler's client;
    or, when the server has pg_wait_sampling, reads its profile once a second.

    `look(at)` is called by the sampler's thread at every one of its ticks (`tick_hz` a
    second).
    """

    def __init__(self, client: Client, dbname: str, hz: int, log: Callable[[str], None]) -> None:
        self.client = client
        self.params = {"dbname": dbname}
        self.log = log
        self.period_s = _extension_period(client)
        if self.period_s is not None:
            self.tally = WaitTally(SOURCE_EXTENSION, 1.0 / self.period_s)
            self.tick_hz = 1
        else:
            self.tally = WaitTally(SOURCE_ACTIVITY, float(hz))
            self.tick_hz = hz
        self._previous: tuple[float, Counter[Key]] | None = None  # pg_wait_sampling's last read

    def look(self, at: float) -> None:
        """One look at time `at` (epoch seconds) with the live sampler; one read of the
        cumulative profile, its increase filed under the second it covers, with the extension.
        An error is raised to the timeline sampler, which switches the source off and flags the
        run (its series end there)."""
        if self.period_s is None:
            found = _counted(self.client.rows(load("wait_sample"), self.params))
            self.tally.add(int(at), 1.0, found)
        else:
            self._read_profile(at)

    def _read_profile(self, at: float) -> None:
        assert self.period_s is not None
        total = _counted(self.client.rows(load("wait_sampling_profile"), self.params))
        if self._previous is not None:
            since, before = self._previous
            grown = Counter({k: n - before.get(k, 0) for k, n in total.items()})
            # A process gone since the last read drops out: its counts are not negative time.
            grown = Counter({k: n for k, n in grown.items() if n > 0})
            self.tally.add(int(since), (at - since) / self.period_s, grown)
        self._previous = (at, total)


def _extension_period(client: Client) -> float | None:
    """pg_wait_sampling's sample period in seconds when it is installed and loaded; else None."""
    try:
        rows = client.rows(load("wait_sampling_period"))
    except QueryRefused:
        return None
    text = rows[0][0] if rows else None
    try:
        period_ms = float(str(text)) if text is not None else 0.0
    except ValueError:
        return None
    return period_ms / 1000.0 if period_ms > 0 else None
