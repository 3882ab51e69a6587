"""Switching inside one run, the engine: one pgbench run during which the sets take turns.

pgbench runs (the bench's own command line and collection, `measure.collected`, on a thread
of its own) while this thread drives the one run loop (`RoundLoop`) over the sets: each unit
of a round is a period, `run_one` puts the set in effect through the comparison's switcher
(the journalled path every comparison uses: the sandbox's settings file and a reload waited
for until pg_conf_load_time moves) and waits out the period. Each round (a pair of periods
for two sets) is judged as the per-run design judges a round (`judge_round` through the
comparison's `after`), on figures read from pgbench's per-transaction log as it grows
(`_LogRouter`: complete lines only, each filed under the period whose measured window holds
its completion second, burn-in and switching time left out). At each look the round's periods
are summarised by `measure.summarized` on their own per-second rows (with the timeline sampled
so far, `TimelineSampler.so_far`) and stored as runs of their sets, with the round as `repeat`
and a `switching_period` event naming the design, the pgbench run and the window, so that a
SIGKILL keeps every round looked at and `compare --resume` goes on after it; the verdicts come
from these records (`RunOutcome.of`), as for any run. When the rounds end pgbench is stopped
(SIGTERM), the rest of its log is read, and the periods of a round cut short by an
interruption are stored from it.

A period's TPS is its successful transactions over its whole measured seconds; its latency
mean, p99 and the rest come from the log lines of those seconds (the histogram of
pgbench.txlog, as for a whole run), so they are exact up to the log's sampling.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pgdyno.collect.interference import ProcessTable
from pgdyno.collect.sampler import Timeline, TimelineSampler
from pgdyno.collect.timeline import sampling_rate
from pgdyno.collect.waits import WaitTally
from pgdyno.errors import Interrupted, ParseError, PgbenchFailed
from pgdyno.experiment.bench import Connected
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import BenchSpec
from pgdyno.experiment.measure import (
    Collected,
    MeasureRequest,
    collected,
    interference_between,
    process_table,
    summarized,
)
from pgdyno.experiment.rounds import RoundLog, RoundLoop
from pgdyno.experiment.schedule import Schedule
from pgdyno.experiment.switching import PairOrders, Window, measured_window, period_end
from pgdyno.pgbench.command import RunOptions
from pgdyno.pgbench.driver import Driver
from pgdyno.pgbench.execute import PgbenchResult
from pgdyno.pgbench.output import Summary
from pgdyno.pgbench.txlog import LatencySummary, summarize
from pgdyno.plan.check import CheckedSet
from pgdyno.postgres.server import non_default_settings
from pgdyno.records import Event, RunCell, RunRecord
from pgdyno.records.stored import RunOutcome

PERIOD_EVENT = "switching_period"  # the event that marks a run as a period of a switched run
# How long a look waits for every thread's log to reach the end of the round's last period
# (pgbench writes it through a buffer), and how long pgbench may take to log its first line.
SETTLE_S = 3.0
START_S = 60.0
POLL_S = 0.1
# pgbench's -T: far beyond the rounds (it is stopped when they end), and the margin of it
EXTRA_S = 120


class _Stop(Exception):
    """Raised on pgbench's tick to end the run (the rounds ended)."""


@dataclass
class _LogRouter:
    """pgbench's per-transaction log files (`tx.*` in `run_dir`), read as they grow: complete
    lines only, each filed under the period whose window holds its completion second (the
    5th field), one file per pgbench thread per period (`out/p<N>/tx.<thread file>`), so that
    each period's files are in time order, as `summarize` reads them."""

    run_dir: Path
    out: Path
    windows: dict[int, Window] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)
    newest: dict[str, int] = field(default_factory=dict)  # per file, the last second read
    # each client's last transaction number read, and per period each client's number before
    # its first line there (None: its first line of the run), so that a period's transactions
    # are counted exactly from a sampled log (`summarize`'s numbers_before)
    numbers: dict[int, int] = field(default_factory=dict)
    before: dict[int, dict[int, int | None]] = field(default_factory=dict)

    def read(self, *, final: bool = False) -> None:
        for path in sorted(self.run_dir.glob("tx.*")):
            start = self.offsets.get(path.name, 0)
            with path.open("rb") as f:
                f.seek(start)
                data = f.read()
            cut = data.rfind(b"\n") + 1
            self.offsets[path.name] = start + cut
            if final and cut < len(data):  # a line cut short by the stop: it never completed
                with path.open("r+b") as f:
                    f.truncate(start + cut)
            self._file(path.name, data[:cut].decode("ascii", errors="replace"))

    def _file(self, name: str, text: str) -> None:
        by_period: dict[int, list[str]] = {}
        for line in text.splitlines(keepends=True):
            try:
                fields = line.split(" ", 5)
                client, transaction, second = int(fields[0]), int(fields[1]), int(fields[4])
            except (IndexError, ValueError):
                raise ParseError(
                    f"pgbench's transaction log {name} has a line without its client, number "
                    f"or completion time: {line[:80]!r}"
                ) from None
            self.newest[name] = second
            for number, window in self.windows.items():
                if window.holds(second):
                    by_period.setdefault(number, []).append(line)
                    self.before.setdefault(number, {}).setdefault(client, self.numbers.get(client))
                    break
            self.numbers[client] = transaction
        for number, lines in by_period.items():
            target = self.out / f"p{number}" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a", encoding="ascii") as f:
                f.writelines(lines)

    def logged_through(self) -> int | None:
        """The last second every thread's log has reached (None before each logged a line)."""
        return min(self.newest.values()) if self.newest else None

    def files(self, number: int) -> list[Path]:
        return sorted((self.out / f"p{number}").glob("tx.*"))

    def numbers_before(self, number: int) -> dict[int, int]:
        """Each client's last transaction number before its first line in period `number`."""
        return {c: n for c, n in self.before.get(number, {}).items() if n is not None}


@dataclass
class _StoppableDriver:
    """The bench's driver, with a stop: once `stop` is set, the next tick of pgbench's wait
    ends it (SIGTERM to its process group), the rest of its log is read by the router, and a
    result without pgbench's closing summary is returned (the periods are summarised from the
    log, not from it)."""

    inner: Driver
    stop: threading.Event
    router: _LogRouter
    started_at: float = 0.0  # when pgbench was started (epoch seconds)

    @property
    def host(self) -> str:
        return self.inner.host

    @property
    def log_clock_shift_s(self) -> int:
        return self.inner.log_clock_shift_s

    def argv(
        self, dsn: str, opts: RunOptions, log_prefix: Path | None, *, sampling_rate: float = 1.0,
        scale: int | None = None,
    ) -> list[str]:  # fmt: skip
        return self.inner.argv(dsn, opts, log_prefix, sampling_rate=sampling_rate, scale=scale)

    def execute(
        self, argv: list[str], *, run_dir: Path, duration_s: float, env: Mapping[str, str],
        on_tick: Callable[[float], None], on_spawn: Callable[[int], None] | None = None,
    ) -> PgbenchResult:  # fmt: skip
        started_at = self.started_at = time.time()

        def tick(elapsed_s: float) -> None:
            if self.stop.is_set():
                raise _Stop
            on_tick(elapsed_s)

        try:
            self.inner.execute(argv, run_dir=run_dir, duration_s=duration_s, env=env,
                               on_tick=tick, on_spawn=on_spawn)  # fmt: skip
        except _Stop:
            pass
        else:
            raise PgbenchFailed(
                f"pgbench ended (its -T of {duration_s:.0f} s) before the rounds switched "
                "inside it did: run again with a smaller budget."
            )
        finally:
            self.router.read(final=True)
        return PgbenchResult(_no_summary(), "", "", started_at)


def _no_summary() -> Summary:
    """pgbench's closing summary, which a stopped pgbench does not print."""
    return Summary(
        transaction_type=None, scaling_factor=None, query_mode=None, clients=None,
        threads=None, duration_s=None, transactions=0, failed_transactions=0,
        latency_avg_ms=None, latency_stddev_ms=None, initial_connection_time_ms=None, tps=0.0,
        rate_lag_avg_ms=None, rate_lag_max_ms=None, skipped_transactions=None,
        late_transactions=None, maximum_tries=None, scripts=(), statements=(),
    )  # fmt: skip


@dataclass(frozen=True)
class Period:
    """One period of the run: its set and round, when the set was in effect (epoch seconds)
    and when the next switch began, the whole seconds it measures, the process table around
    it."""

    number: int
    round_no: int
    set_name: str
    switched_at: float
    ended_at: float
    window: Window
    before: ProcessTable | None
    after: ProcessTable | None

    def event(self, pgbench_started_at: float, burn_in_s: float) -> Event:
        """What marks the stored run as this period of the switched run."""
        return Event(self.switched_at, PERIOD_EVENT, {
            "design": "inside", "period": self.number, "round": self.round_no,
            "pgbench_started_at": round(pgbench_started_at, 3),
            "switched_at": round(self.switched_at, 3), "ended_at": round(self.ended_at, 3),
            "burn_in_s": burn_in_s, "first_second": self.window.first,
            "last_second": self.window.last,
        })  # fmt: skip


def period_summary(total: LatencySummary, seconds: int) -> Summary:
    """A period's figures in the shape of pgbench's closing summary: its transactions over its
    whole measured seconds.

    >>> from pgdyno.pgbench.txlog import LatencySummary
    >>> t = LatencySummary(None, 800, 800, 1, 2, 3, 4, 5, 2, 0, None, None, 1.25, 0.5, 0.3)
    >>> s = period_summary(t, 8)
    >>> s.tps, s.transactions, s.failed_transactions, s.latency_avg_ms, s.duration_s
    (100.0, 800, 2, 1.25, 8.0)
    """
    return replace(
        _no_summary(), duration_s=float(seconds), transactions=total.transactions,
        failed_transactions=total.failed, latency_avg_ms=total.avg_ms,
        latency_stddev_ms=total.stddev_ms, tps=total.transactions / seconds if seconds else 0.0,
        skipped_transactions=total.skipped, rate_lag_avg_ms=total.lag_avg_ms,
        rate_lag_max_ms=total.lag_max_ms,
    )  # fmt: skip


def padded(rows: Sequence[LatencySummary], window: Window) -> list[LatencySummary]:
    """A period's per-second rows for `second_rows`, which leaves out the first and last row
    (a run's, cut by its start and end): one empty second added at each end of the window,
    every whole second of it kept, a second without a logged line as an empty one.

    >>> from pgdyno.pgbench.txlog import LatencySummary
    >>> row = LatencySummary(11, 5, 5, 1, 1, 1, 1, 1, 0, 0, None, None)
    >>> [(r.t, r.transactions) for r in padded([row], Window(10, 12))]
    [(9, 0), (10, 0), (11, 5), (12, 0), (13, 0)]
    """
    by_second = {r.t: r for r in rows if r.t is not None}
    return [
        by_second.get(t) or LatencySummary(t, 0, 0, None, None, None, None, None, 0, 0, None, None)
        for t in range(window.first - 1, window.last + 2)
    ]


@dataclass(frozen=True)
class SwitchJob:
    """What the engine is given: the sets (plan order), the matrix's one cell, the bench spec,
    the comparison's context and ids, the seconds of a period and of its burn-in, the orders'
    seed, and `switch` (puts a set in effect through the comparison's switcher and returns
    the settings in effect, as read back)."""

    checked: tuple[CheckedSet, ...]
    cell: RunCell
    spec: BenchSpec
    ctx: RunContext
    ids: tuple[int, int]  # (session, comparison)
    timing: tuple[int, float]  # (period_s, burn_in_s)
    seed: int
    switch: Callable[[CheckedSet], dict[str, Any]]
    # --resume: the rounds and periods an earlier invocation stored (this one goes on after)
    done: tuple[int, int] = (0, 0)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


class SwitchedRun:
    """One comparison switched inside one pgbench run: `run(ready, log, after)` (see the
    module's docstring); `outcomes` every period as stored (each round's at its look, and on
    an interruption the periods of the unfinished round at the end), `made` the periods
    stored. On --resume (`SwitchJob.done`) the rounds and periods go on from the earlier
    invocation's numbers."""

    def __init__(self, job: SwitchJob, outcomes: list[RunOutcome]) -> None:
        self.job = job
        self.outcomes = outcomes
        self.made = 0
        self.periods: list[Period] = []
        self.stored: set[int] = set()  # the periods stored so far (their numbers)
        self.current: str | None = None
        self.effective: dict[str, dict[str, str]] = {}  # per set, its non-default settings
        self.stop = threading.Event()
        self.found: list[Collected | BaseException] = []
        self.dataset_bytes: int | None = None
        self.sampler: TimelineSampler | None = None  # pgbench's, once it started

    def run(
        self, ready: Connected, log: RoundLog, after: Callable[[int], bool], first: str
    ) -> None:
        job, ctx = self.job, self.job.ctx
        session_id, _ = job.ids
        run_dir = ctx.run_root / f"session-{session_id}" / "switching"
        router = self.router = _LogRouter(run_dir, run_dir / "periods")
        self.collect, self.pg_version = ready.runner.collect, ready.info.version
        request = self.request = self._request(ready, run_dir, router)
        self.current = first  # the set the comparison applied
        self.effective[self.current] = non_default_settings(ready.client)
        pgbench = threading.Thread(
            target=self._collect, args=(request, ready), name="pgdyno-switched-pgbench",
            daemon=True,
        )  # fmt: skip
        interrupted = False
        self._plan_progress()
        pgbench.start()
        try:
            self._started(router)
            self._warm_up()
            RoundLoop(
                Schedule(job.checked, PairOrders(job.seed)), log,
                lambda checked, round_no: self.period(ready, checked, round_no),
                lambda round_no: self.look(ready, after, round_no), lambda c: c.name,
                done=job.done[0],
            ).run()  # fmt: skip
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
        finally:
            self.stop.set()
            pgbench.join()
        result = self.found[0] if self.found else None
        if isinstance(result, BaseException):
            raise result
        if result is not None:  # the periods of a round its look did not store
            self._store(ready, self.periods, result.timeline, result.waits)
        if interrupted:
            raise Interrupted("pgdyno was interrupted; the finished periods are saved.")

    def _plan_progress(self) -> None:
        """The periods planned (as many as the budget could hold, with adaptive rounds, less
        the rounds an earlier invocation ran)."""
        job, spec = self.job, self.job.spec
        sets, period_s = len(job.checked), float(job.timing[0])
        adaptive = spec.adaptive
        rounds = adaptive.most_rounds(period_s * sets) if adaptive else spec.repeats
        rounds = max(rounds - job.done[0], 1)
        job.ctx.progress.planned(
            [replace(job.cell, index=i, repeat=i // sets + 1) for i in range(rounds * sets)],
            period_s,
        )

    # -- pgbench on its own thread ---------------------------------------------------------------

    def _request(self, ready: Connected, run_dir: Path, router: _LogRouter) -> MeasureRequest:
        job, spec, cell = self.job, self.job.spec, self.job.cell
        runner = ready.runner
        workload = runner.workloads[cell.workload]
        adaptive = spec.adaptive
        period_s = job.timing[0]
        planned = (
            adaptive.budget_s if adaptive is not None
            else spec.repeats * len(job.checked) * period_s * 1.5
        )  # fmt: skip
        opts = RunOptions(
            workload, cell.clients, cell.jobs, int(planned + spec.warmup_s + EXTRA_S),
            spec.protocol, spec.rate, spec.latency_limit_ms, spec.per_statement, spec.progress,
            workload.max_tries if runner.retries else 1,
        )  # fmt: skip
        dataset = ready.dataset(cell.scale, workload.dataset, job.ctx.progress)
        runner.fresh_copy(cell, dataset, may_write=workload.may_write)
        rate = self._sampling_rate(ready, opts, run_dir)
        if workload.may_write:
            runner.fresh_copy(cell, dataset, may_write=True)
        self.dataset_bytes = dataset.size_bytes
        driver = self.driver = _StoppableDriver(runner.driver, self.stop, router)
        return MeasureRequest(driver, runner.bench_dsn, opts, cell.scale, rate, 0, run_dir,
                              runner.env)  # fmt: skip

    def _sampling_rate(self, ready: Connected, opts: RunOptions, run_dir: Path) -> float:
        """The log's sampling rate as a bench run's (a 3 s probe when nothing else tells)."""
        runner, cell = ready.runner, self.job.cell
        mode = self.job.spec.latency_log
        if mode != "auto":
            return 1.0 if mode == "full" else float(mode)
        expected = runner.expected_tps(cell)
        if expected is None:
            self.job.ctx.progress.phase("probing the transaction rate")
            expected = runner.unmeasured(opts, cell, 3, run_dir / "probe")
        return sampling_rate(expected)

    def _collect(self, request: MeasureRequest, ready: Connected) -> None:
        try:
            cell, progress = self.job.cell, self.job.ctx.progress
            # No CPU profile: one perf record would mix the sets' periods.
            collect = replace(ready.runner.collect, perf=None)
            self.found.append(
                collected(request, collect,
                          on_tick=lambda t: progress.tick(cell, t), log=self.job.ctx.log,
                          on_sampler=partial(setattr, self, "sampler"))
            )  # fmt: skip
        except BaseException as exc:  # handed to the loop's thread, which raises it
            self.found.append(exc)
            self.stop.set()

    def _started(self, router: _LogRouter) -> None:
        """Wait for pgbench's first logged transaction (its clients connected)."""
        deadline = time.monotonic() + START_S
        while router.logged_through() is None:
            self._alive()
            if time.monotonic() > deadline:
                raise PgbenchFailed(f"pgbench logged no transaction within {START_S:.0f} s.")
            time.sleep(POLL_S * 5)
            router.read()

    def _warm_up(self) -> None:
        if self.job.spec.warmup_s:
            self.job.ctx.progress.phase("warming up")
            self._sleep_until(time.time() + self.job.spec.warmup_s)

    def _alive(self) -> None:
        """Raise what ended pgbench's thread early, if it did."""
        if self.found:
            result = self.found[0]
            if isinstance(result, BaseException):
                raise result
            raise PgbenchFailed("pgbench ended before the rounds switched inside it did.")

    def _sleep_until(self, epoch: float) -> None:
        while (left := epoch - time.time()) > 0:
            self._alive()
            time.sleep(min(POLL_S * 5, left))

    # -- the periods -----------------------------------------------------------------------------

    def period(self, ready: Connected, checked: CheckedSet, round_no: int) -> None:
        """One period of `checked`: put in effect (unless it already is), then waited out."""
        job, ctx = self.job, self.job.ctx
        ctx.progress.phase(f"switching inside one run: round {round_no}, set {checked.name}")
        begun = time.time()
        if checked.name != self.current:
            effective = job.switch(checked)
            self.current = checked.name
            if checked.name not in self.effective:
                ctx.store.comparisons.record_effective(job.ids[1], checked.name, effective)
                self.effective[checked.name] = non_default_settings(ready.client)
        switched_at = time.time()
        before = process_table(ready.runner.collect, ctx.log)
        self._sleep_until(period_end(begun, switched_at, *job.timing))
        ended_at = time.time()
        after = process_table(ready.runner.collect, ctx.log)
        window = measured_window(switched_at, ended_at, job.timing[1])
        number = job.done[1] + len(self.periods) + 1
        self.router.windows[number] = window
        self.periods.append(Period(number, round_no, checked.name, switched_at, ended_at, window,
                                   before, after))  # fmt: skip

    def look(self, ready: Connected, after: Callable[[int], bool], round_no: int) -> bool:
        """The look after round `round_no`: the log read until every thread has logged past
        the round's last period (or SETTLE_S passed), the round's periods stored (a SIGKILL
        later keeps them), judged with the rest (`after`, the comparison's own look); whether
        the rounds end."""
        router = self.router
        done = [p for p in self.periods if p.round_no == round_no]
        if done:
            deadline = time.monotonic() + SETTLE_S
            router.read()
            while (router.logged_through() or 0) <= done[-1].window.last and (
                time.monotonic() < deadline
            ):
                time.sleep(POLL_S)
                router.read()
        timeline, waits = self.sampler.so_far() if self.sampler else (Timeline(), None)
        self._store(ready, done, timeline, waits)
        return after(round_no)

    def _store(
        self, ready: Connected, periods: Sequence[Period], timeline: Timeline,
        waits: WaitTally | None,
    ) -> None:  # fmt: skip
        """The periods not stored yet, each summarised from its own log lines and stored as a
        run of its set, as judged from then on."""
        job, ctx = self.job, self.job.ctx
        session_id, comparison_id = job.ids
        for p in periods:
            if p.number in self.stored:
                continue
            record = self._record(ready, p, timeline, waits)
            record = replace(record, comparison_id=comparison_id, set_name=p.set_name)
            run_id = ctx.store.add_run(session_id, record)
            self.stored.add(p.number)
            ctx.progress.finished(record.cell, record, run_id)
            self.outcomes.append(RunOutcome.of(run_id, record))
            self.made += 1

    def _record(
        self, ready: Connected, p: Period, timeline: Timeline, waits: WaitTally | None
    ) -> RunRecord:
        job, request = self.job, self.request
        files = self.router.files(p.number)
        rows, total = summarize(
            files, request.sampling_rate, with_lag=request.opts.rate is not None,
            with_retries=request.opts.max_tries != 1,
            scripts=len(request.opts.workload.scripts),
            numbers_before=self.router.numbers_before(p.number),
        ) if files else ([], LatencySummary(None, 0, 0, None, None, None, None, None, 0, 0,
                                            None, None))  # fmt: skip
        window = p.window
        own = Collected(
            PgbenchResult(period_summary(total, window.seconds), "", "", p.switched_at),
            tuple(padded(rows, window)), total,
            Timeline(
                samples=[s for s in timeline.samples if window.holds(s[0])],
                events=[e for e in timeline.events if window.holds(int(e.t))],
            ),
            interference_between(p.before, p.after, ready.runner.collect), waits,
        )  # fmt: skip
        measured = summarized(own, request.opts, 0, request.sampling_rate,
                              ready.runner.collect.cpus)  # fmt: skip
        cell = replace(job.cell, index=p.number - 1, repeat=p.round_no)
        return replace(
            ready.base, cell=cell, started_at=_iso(p.switched_at), finished_at=_iso(p.ended_at),
            duration_s=window.seconds, warmup_s=math.ceil(job.timing[1]),
            pgbench_argv=tuple(request.driver.argv(
                request.dsn, request.opts, request.run_dir / "tx",
                sampling_rate=request.sampling_rate, scale=request.scale)),
            settings=self.effective.get(p.set_name, ready.base.settings),
            dataset_bytes=self.dataset_bytes, summary=measured.summary,
            seconds=measured.seconds, latency=measured.latency,
            latency_source=measured.latency_source, samples=measured.samples,
            events=(p.event(self.driver.started_at, job.timing[1]), *measured.events),
            health=measured.health, interference=measured.interference, waits=measured.waits,
            status="ok" if window.seconds and total.transactions else "failed",
            error=None if window.seconds and total.transactions
            else "the period logged no transaction in its measured seconds",
        )  # fmt: skip
