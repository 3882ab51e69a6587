"""The timeline sampler: a thread that reads OS and PostgreSQL counters once a second.

Ticks fall on wall-clock second boundaries, so that every series shares the clock of
pgbench's per-transaction log: the values of the tick at second t+1 describe the interval
[t, t+1) and are stored under the epoch second t. A source that fails is switched off with one
log line; the others go on. Whatever cuts a series short (a source switched off, the thread
dying or hanging) is also listed in `Timeline.gaps`, so the run is flagged, not just logged.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from pgdyno.collect.pgstat_io import without_idle_io
from pgdyno.collect.pgstats import PgStatsSampler, pg_sample
from pgdyno.collect.procfs import ProcReader, ProcSnapshot, os_sample
from pgdyno.collect.waits import WaitSampler, WaitTally
from pgdyno.postgres.serverlog import CheckpointEvent, LogTail
from pgdyno.records import Event, Sample

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
FINAL_PART = 0.5  # the least share of an interval the last, partial one must cover to be kept


class OsSource(Protocol):
    """Where the OS counters come from: this host's /proc (ProcReader) or a remote host's
    (remote/os_source.py). `snapshot` may give None for a tick it has no new counters for."""

    def snapshot(self) -> ProcSnapshot | None: ...

    def read(self, name: str) -> str | None: ...


def cpu_ticks(stat: str) -> int | None:
    """utime + stime of a /proc/<pid>/stat text (all the process's threads), in clock ticks.

    >>> cpu_ticks("42 (pg bench) S 1 42 42 0 -1 4194304 9 0 0 0 70 5 0 0 20 0 3 0 99")
    75
    """
    try:
        fields = stat.rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


def process_cpu_ticks(pid: int, proc_root: Path) -> int | None:
    """utime + stime of a process (all its threads), in clock ticks."""
    try:
        return cpu_ticks((proc_root / str(pid) / "stat").read_text())
    except OSError:
        return None


def next_planned(now: float, step: float) -> float:
    """The next tick after `now` on the grid of `step` seconds: ticks stay on the grid however
    late a look ends.

    >>> next_planned(10.25, 0.1), next_planned(10.999, 0.5)
    (10.3, 11.0)
    """
    return round((math.floor(now / step + 1e-9) + 1) * step, 9)


def whole_tick(planned: float, at: float, steps: tuple[float, float], last: int) -> int | None:
    """The interval whose once-an-interval work (OS and pg_stat snapshots) a tick does, or None
    for a tick between intervals (a wait look only). `steps`: (the tick step, the interval).

    A tick planned on an interval boundary does it; so does the first tick after a boundary
    that a slow look made the sampler miss, so that no interval goes unrecorded. `last` starts
    as the interval sampling began in: wait looks slower than a step (a loaded host) can plan
    every tick past the first boundaries, and a short run then had no snapshot at all.

    >>> whole_tick(10.0, 10.001, (0.1, 1.0), 9), whole_tick(10.1, 10.1, (0.1, 1.0), 10)
    (10, None)
    >>> whole_tick(10.2, 10.21, (0.1, 1.0), 9)  # the tick at 10.0 came after 10.1: caught up
    10
    >>> whole_tick(10.3, 10.3, (0.1, 1.0), 10)  # before the first boundary: a look only
    >>> whole_tick(11.1, 11.05, (0.1, 1.0), 10)  # slow looks planned past 11.0: caught up
    11
    >>> whole_tick(11.0, 10.9999, (0.1, 1.0), 10)  # woken a hair early: still the boundary
    11
    """
    step, interval = steps
    if round(planned / step) % round(interval / step) == 0:
        return round(planned / interval)
    passed = math.floor(at / interval + 1e-9)
    return passed if passed > last else None


class TickPlan:
    """The sampler thread's ticks: where the next one is planned (`next`) and whether a tick
    does the once-an-interval work (`due`), remembering the interval it was last done for; at
    first, the one sampling began in (its snapshot would cover part of it only)."""

    def __init__(self, start: float, step: float, interval: float) -> None:
        self.step, self.interval = step, interval
        self.last = math.floor(start / interval + 1e-9)

    def next(self, now: float) -> float:
        return next_planned(now, self.step)

    def due(self, planned: float, at: float) -> int | None:
        found = whole_tick(planned, at, (self.step, self.interval), self.last)
        if found is not None:
            self.last = found
        return found


def checkpoint_event(event: CheckpointEvent) -> Event:
    detail = {k: v for k, v in asdict(event).items() if k not in ("at", "phase") and v is not None}
    return Event(event.at, f"checkpoint_{event.phase}", detail)


@dataclass
class Timeline:
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    client_cpu_ticks: int = 0
    client_seconds: float = 0.0
    gaps: list[str] = field(default_factory=list)  # why series end early, one clause each

    @property
    def client_cpu_pct(self) -> float | None:
        """pgbench's CPU use over the run, in % of one core."""
        if self.client_seconds <= 0:
            return None
        return 100.0 * self.client_cpu_ticks / CLOCK_TICKS / self.client_seconds


class TimelineSampler:
    def __init__(
        self,
        *,
        log: Callable[[str], None],
        proc_root: Path,
        devices: Sequence[str] | None = None,
        pg: PgStatsSampler | None = None,
        server_log: LogTail | None = None,
        os_source: OsSource | None = None,
        client_source: OsSource | None = None,
    ) -> None:
        """`os_source` defaults to a ProcReader of `proc_root`; `client_source`, where the load
        generator's /proc/<pid>/stat is read, to `os_source` (the host pgbench runs on).
        The PostgreSQL sampler's wait sampler (`pg.waits`) looks at the server's sessions at
        every tick of its own rate (whole seconds included, after the other sources)."""
        self.log = log
        self.os_source = os_source
        self.client_source = client_source
        self.proc_root = proc_root
        self.devices = devices
        self.pg = pg
        self.server_log = server_log
        self.waits: WaitSampler | None = pg.waits if pg is not None else None
        self.interval_s = 1.0
        self.timeline = Timeline()
        self._pid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgdyno-sampler", daemon=True)
        self._failed: dict[str, str] = {}  # source -> when and why it was switched off
        self._died: str | None = None
        self._started = time.monotonic()

    def watch_pid(self, pid: int) -> None:
        """Also measure this process's CPU use (the load generator)."""
        self._pid = pid

    def start(self) -> None:
        if self.server_log is not None:
            self.server_log.start()
        self._started = time.monotonic()
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> Timeline:
        """End sampling; the timeline, with `gaps` saying which series end early and why."""
        self._stop.set()
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            self._died = (
                f"the timeline sampler hung (no answer within {timeout_s:.0f} s of the run's "
                f"end, e.g. a read of {self.proc_root} that never returned); the series of the "
                "run end early"
            )
            self.log(self._died)
        if self.server_log is not None:
            events = self._guard("server log", self.server_log.read_events) or []
            self.timeline.events.extend(checkpoint_event(e) for e in events)
        # A copy: a hung thread that wakes up later must not change what is stored. The io.*
        # series that stayed at zero through the run are left out (collect/pgstat_io.py).
        samples = list(self.timeline.samples)
        timeline = replace(self.timeline, samples=without_idle_io(samples))
        timeline.gaps = [*([self._died] if self._died else []), *self._failed.values()]
        return timeline

    def so_far(self) -> tuple[Timeline, WaitTally | None]:
        """Copies of what was sampled so far, the thread going on: for a part of the run
        stored before the run ends (a period of a switched run). The server log's checkpoint
        events read so far are added to the timeline first (`stop` reads the rest)."""
        if self.server_log is not None:
            events = self._guard("server log", self.server_log.read_events) or []
            self.timeline.events.extend(checkpoint_event(e) for e in events)
        timeline = replace(
            self.timeline, samples=list(self.timeline.samples),
            events=list(self.timeline.events), gaps=list(self._failed.values()),
        )  # fmt: skip
        return timeline, self.waits.tally.copy() if self.waits is not None else None

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self._started:.0f} s into the run"

    def _guard[T](self, source: str, read: Callable[[], T]) -> T | None:
        if source in self._failed:
            return None
        try:
            return read()
        except Exception as exc:  # a collector must never end a benchmark run
            self._failed[source] = (
                f"{source} sampling stopped {self._elapsed()} ({exc}); its series end there"
            )
            self.log(f"{source} sampling stopped: {exc}")
            return None

    def _run(self) -> None:
        """The thread: whatever escapes the per-source guards is recorded, never silent."""
        try:
            proc = self.os_source or ProcReader(self.proc_root, self.devices)
            self._loop(proc, self.client_source or proc)
        except Exception as exc:
            self._died = (
                f"the timeline sampler died {self._elapsed()} ({type(exc).__name__}: {exc}); "
                "every series ends there"
            )
            self.log(self._died)

    def _loop(self, proc: OsSource, client: OsSource) -> None:
        # Lower this thread's priority (Linux sets nice per thread): when the CPUs are busy,
        # pgbench and the server go first and the samples are a few milliseconds late.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        prev_os: ProcSnapshot | None = None
        prev_pg: dict[str, float] | None = None
        prev_cpu: tuple[int, int] | None = None  # (pid, ticks)
        prev_tick: float | None = None
        step = self.interval_s / (self.waits.tick_hz if self.waits is not None else 1)
        plan = TickPlan(time.time(), step, self.interval_s)
        # The interval a snapshot was taken for names its sample, not the clock at the look: a
        # look half a second late (a slow wait look caught up after it) rounded to the next
        # second, the one the next look names, and the two samples collided in the store.
        prev_due: int | None = None
        while True:
            now = time.time()
            next_tick = plan.next(now)
            stopping = self._stop.wait(next_tick - now)
            tick = time.time()
            if stopping:
                # The run's last part second is kept when it is at least half an interval: a
                # short run on a busy host (this thread is niced) still gets its samples.
                if prev_tick is None or tick - prev_tick < FINAL_PART * self.interval_s:
                    return
            else:
                if plan.due(next_tick, tick) is None:
                    self._look_at_waits(tick)  # a tick between whole seconds
                    continue
            cur_os = self._guard("OS", proc.snapshot)
            cur_pg = self._guard("PostgreSQL", self.pg.snapshot) if self.pg else None
            pid = self._pid
            stat = client.read(f"{pid}/stat") if pid else None
            ticks = cpu_ticks(stat) if stat else None
            if prev_tick is not None and prev_due is not None:
                span = (prev_tick, tick, round(prev_due * self.interval_s))
                self._record(span, (prev_os, cur_os), (prev_pg, cur_pg))
                if prev_cpu is not None and ticks is not None and prev_cpu[0] == pid:
                    used = ticks - prev_cpu[1]
                    self._guard(
                        "pgbench CPU", partial(self._client_cpu, (prev_tick, tick), used, span[2])
                    )
            prev_os, prev_pg, prev_tick, prev_due = cur_os, cur_pg, tick, plan.last
            prev_cpu = (pid, ticks) if pid and ticks is not None else None
            if stopping:
                return
            self._look_at_waits(tick)

    def _look_at_waits(self, tick: float) -> None:
        if self.waits is not None:
            self._guard("wait events", partial(self.waits.look, tick))

    def _client_cpu(self, interval: tuple[float, float], used: int, t: int) -> None:
        """pgbench's CPU between two looks, named `t`: the second the first look was due at,
        as every other sample of the interval (rounding the look's own clock named a late
        look's interval after the next second, and a switched run failed to store its period:
        UNIQUE constraint on run_samples, seen in the suite on a busy host)."""
        seconds = interval[1] - interval[0]
        pct = 100.0 * used / CLOCK_TICKS / seconds
        self.timeline.samples.append((t, "client.cpu_pct", pct))
        self.timeline.client_cpu_ticks += used
        self.timeline.client_seconds += seconds

    def _record(
        self,
        span: tuple[float, float, int],
        os_pair: tuple[ProcSnapshot | None, ProcSnapshot | None],
        pg_pair: tuple[dict[str, float] | None, dict[str, float] | None],
    ) -> None:
        """The sample of the interval between two looks, `span` (the looks' times and the
        second that names it)."""
        prev_tick, tick, t = span
        values: dict[str, float] = {}
        prev_os, cur_os = os_pair
        if prev_os is not None and cur_os is not None:
            # Guarded like the reads: a value that parses but breaks the arithmetic (a
            # counter too large for a float) switches the source off, not the sampler.
            values.update(self._guard("OS", lambda: os_sample(prev_os, cur_os, self.devices)) or {})
        prev_pg, cur_pg = pg_pair
        if prev_pg is not None and cur_pg is not None:
            seconds = tick - prev_tick
            values.update(
                self._guard("PostgreSQL", lambda: pg_sample(prev_pg, cur_pg, seconds)) or {}
            )
        self.timeline.samples.extend((t, name, float(v)) for name, v in values.items())
