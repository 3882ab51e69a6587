"""The wait-event sampler: what the server's sessions are doing, several times a second.

No extension is needed: pg_stat_activity is read in the timeline sampler's own connection, one
statement a look (postgres/queries/wait_sample.sql), `hz` times a second on the sampler's
thread. When pg_wait_sampling is loaded (shared_preload_libraries) and created in the database
that connection is on (the one --dsn names: the benchmark database itself is dropped and
copied again before every run, so the sampler never connects to it), its profile, sampled every
pg_wait_sampling.profile_period (10 ms) inside the server, is read once a second instead and
the source says so. Loaded but not created there, or the other way round, is said in one line.

Both give the same tally: per wall-clock second, how many looks were taken and how many
sessions were found in each (process kind, event); stats/waits.py turns it into per-second
average active sessions and the run's profile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pgdyno.errors import QueryRefused
from pgdyno.postgres import stats
from pgdyno.postgres.client import Client
from pgdyno.postgres.stats import WaitCount, WaitSamplingCheck

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

    def copy(self) -> WaitTally:
        """A copy, taken while another thread may go on adding to the newest second: the
        dictionaries copied whole first (one step each), each second's counts then copied.

        >>> t = WaitTally("activity", 10.0)
        >>> t.add(5, 1.0, Counter({("", "CPU*"): 2}))
        >>> c = t.copy()
        >>> t.add(5, 1.0, Counter({("", "CPU*"): 1}))
        >>> c.ticks, c.counts[5][("", "CPU*")], t.counts[5][("", "CPU*")]
        ({5: 1.0}, 2, 3)
        """
        counts = dict(self.counts)
        return WaitTally(self.source, self.hz, dict(self.ticks),
                         {second: Counter(dict(c)) for second, c in counts.items()})  # fmt: skip


def _counted(rows: Iterable[WaitCount]) -> Counter[Key]:
    """Rows of (process, event, sessions) as a Counter; malformed rows are skipped.

    >>> W = WaitCount
    >>> _counted([W("", "CPU*", 3), W("checkpointer", "IO:DataFileSync", 1), W("", None, 2)])
    Counter({('', 'CPU*'): 3, ('checkpointer', 'IO:DataFileSync'): 1})
    """
    found: Counter[Key] = Counter()
    for process, event, sessions in ((r.process, r.event, r.count) for r in rows):
        if isinstance(process, str) and isinstance(event, str) and isinstance(sessions, int):
            found[(process, event)] += sessions
    return found


@dataclass(frozen=True)
class ExtensionCheck:
    """What postgres/queries/wait_sampling_check.sql found of pg_wait_sampling in the database
    the sampler is connected to."""

    dbname: str
    created: bool  # CREATE EXTENSION ran in this database
    period_ms: float | None  # None: the library is not loaded (or the period is not positive)
    profile_pid: bool  # the profile is kept per process
    sample_cpu: bool | None  # None: a version without the setting, which never samples CPU

    @classmethod
    def of(cls, row: WaitSamplingCheck) -> ExtensionCheck:
        """
        >>> ExtensionCheck.of(WaitSamplingCheck("postgres", True, "10", "on", None))
        ExtensionCheck(dbname='postgres', created=True, period_ms=10.0, profile_pid=True, \
sample_cpu=None)
        """
        return cls(
            dbname=str(row.dbname),
            created=row.created is True,
            period_ms=_milliseconds(row.period_ms),
            profile_pid=row.profile_pid == "on",
            sample_cpu=None if row.sample_cpu is None else row.sample_cpu == "on",
        )

    @property
    def period_s(self) -> float | None:
        """The sample period in seconds when the profile can stand in for pg_stat_activity."""
        if self.period_ms is None or self.problem() is not None:
            return None
        return self.period_ms / 1000.0

    def problem(self) -> str | None:
        """Why the extension's profile is not used, for the log; None when it is used or when
        the extension is not there at all (nothing to say).

        >>> ExtensionCheck("postgres", True, 10.0, True, True).problem() is None
        True
        >>> print(ExtensionCheck("postgres", False, 10.0, True, True).problem())
        pg_wait_sampling is loaded but not created in database postgres, the one pgdyno connects to (--dsn): run CREATE EXTENSION pg_wait_sampling there to use it
        >>> print(ExtensionCheck("postgres", True, 10.0, True, None).problem())
        this pg_wait_sampling does not sample sessions on CPU (it has no pg_wait_sampling.sample_cpu setting, which came in 2024): its profile would leave CPU time out
        """  # noqa: E501
        name = SOURCE_EXTENSION
        if not self.created and self.period_ms is None:
            return None
        if not self.created:
            return (
                f"{name} is loaded but not created in database {self.dbname}, the one "
                f"pgdyno connects to (--dsn): run CREATE EXTENSION {name} there to use it"
            )
        if self.period_ms is None:
            return (
                f"{name} is created in database {self.dbname} but not loaded: add it to "
                "shared_preload_libraries and restart the server to use it"
            )
        if not self.profile_pid:
            return (
                f"{name}.profile_pid is off: its profile does not tell the benchmark's "
                "sessions from other processes; set it on to use it"
            )
        if self.sample_cpu is None:
            return (
                f"this {name} does not sample sessions on CPU (it has no {name}.sample_cpu "
                "setting, which came in 2024): its profile would leave CPU time out"
            )
        if not self.sample_cpu:
            return (
                f"{name}.sample_cpu is off: its profile would leave CPU time out; set it on "
                "to use it"
            )
        return None


def check_extension(client: Client) -> ExtensionCheck | None:
    """pg_wait_sampling as the client's database has it; None when that cannot be read."""
    try:
        found = stats.wait_sampling_check(client)
    except QueryRefused:
        return None
    return ExtensionCheck.of(found) if found is not None else None


class ProfileReader:
    """Reads pg_wait_sampling's cumulative profile (postgres/queries/wait_sampling_profile.sql)
    into `tally`: each read files what grew since the previous one under the second that one
    was taken in, as (time between the reads) / `period_s` looks."""

    def __init__(self, client: Client, dbname: str, period_s: float, tally: WaitTally) -> None:
        self.client = client
        self.dbname = dbname
        self.period_s = period_s
        self.tally = tally
        self._previous: tuple[float, Counter[Key]] | None = None

    def read(self, at: float) -> None:
        total = _counted(stats.wait_profile(self.client, self.dbname))
        if self._previous is not None:
            since, before = self._previous
            grown = Counter({k: n - before.get(k, 0) for k, n in total.items()})
            # A process gone since the last read drops out: its counts are not negative time.
            grown = Counter({k: n for k, n in grown.items() if n > 0})
            self.tally.add(int(since), (at - since) / self.period_s, grown)
        self._previous = (at, total)


class WaitSampler:
    """Looks at pg_stat_activity `hz` times a second through the timeline sampler's client;
    or, when the server has a usable pg_wait_sampling (ExtensionCheck), reads its profile once
    a second.

    `look(at)` is called by the sampler's thread at every one of its ticks (`tick_hz` a
    second).
    """

    def __init__(self, client: Client, dbname: str, hz: int, log: Callable[[str], None]) -> None:
        self.client = client
        self.dbname = dbname
        self.log = log
        found = check_extension(client)
        period_s = found.period_s if found is not None else None
        self.profile: ProfileReader | None = None
        if period_s is not None:
            self.tally = WaitTally(SOURCE_EXTENSION, 1.0 / period_s)
            self.profile = ProfileReader(client, dbname, period_s, self.tally)
            self.tick_hz = 1
        else:
            self.tally = WaitTally(SOURCE_ACTIVITY, float(hz))
            self.tick_hz = hz
            problem = found.problem() if found is not None else None
            if problem is not None:
                log(f"{problem}; sampling pg_stat_activity")

    def look(self, at: float) -> None:
        """One look at time `at` (epoch seconds) with the live sampler; one read of the
        cumulative profile with the extension. An error is raised to the timeline sampler,
        which switches the source off and flags the run (its series end there)."""
        if self.profile is None:
            found = _counted(stats.wait_sample(self.client, self.dbname))
            self.tally.add(int(at), 1.0, found)
        else:
            self.profile.read(at)


def _milliseconds(text: object) -> float | None:
    """A positive period setting in milliseconds; None when unset or not a number.

    >>> _milliseconds("10"), _milliseconds(None), _milliseconds("0"), _milliseconds("x")
    (10.0, None, None, None)
    """
    try:
        value = float(str(text)) if text is not None else 0.0
    except ValueError:
        return None
    return value if value > 0 else None
