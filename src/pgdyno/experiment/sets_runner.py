"""`pgdyno compare`: apply each configuration set, run the matrix, restore, repeat in rounds.

The rounds run on the one run loop (`pgdyno.experiment.rounds.RoundLoop`): its schedule orders
the sets of each round by a named design (`pgdyno.experiment.schedule.Balanced`, drawn from a
seed that is logged and stored: every set runs at every position and right after every set
equally often) so slow drift of a shared machine and the set that ran before are spread over
all sets instead of landing on some (--resume continues the stored design and seed); the
verdict compares runs of the same round (`pgdyno.stats.paired`). With a fixed number of repeats
the rounds are counted; with a precision or budget they go on until every comparison is
resolved or the budget is spent (`pgdyno.stats.stopping`), judged on the runs
kept in memory. The comparison and its scales are settled before the first run.

`SetInEffect.applied` puts a set in effect: its host settings through the journal (old values
written first), its PostgreSQL settings made current by a `SetSwitcher` (the sandbox:
`pgdyno.experiment.sandbox_sets`; an existing server: `pgdyno.experiment.server_sets`), every
value read back and stored as what was in effect; host settings go back when the set's runs
end and on every way out; `pgdyno rollback` covers a crash.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pgdyno.environment import Environment
from pgdyno.errors import ClusterError, UsageError
from pgdyno.experiment.bench import (
    Connected,
    connected,
    resolve_scales,
    run_cells,
)
from pgdyno.experiment.capacity import CapacityPlan
from pgdyno.experiment.capacity_sets import (
    SetSweep,
    SweepsJob,
    closed_rates,
    step_spec,
    sweep_sets,
)
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import BenchSpec, expand, seconds_per_run
from pgdyno.experiment.rounds import RoundLog, RoundLoop, RoundPlan, judge_round
from pgdyno.experiment.sandbox_sets import SandboxSwitcher, SetSwitcher
from pgdyno.experiment.schedule import Balanced, Design, Rotation, Schedule
from pgdyno.experiment.session import finished_as, recorded_session
from pgdyno.experiment.storage_sets import expected_dataset_bytes
from pgdyno.experiment.switched_run import SwitchedRun, SwitchJob
from pgdyno.experiment.switching import Choice, plan_slow_settings
from pgdyno.experiment.target import Target, open_sandbox, running
from pgdyno.experiment.twin_sets import IDLE_EVENT, IdleShare, TwinSwitcher, choose, idle_shares
from pgdyno.host.machine import HostFacts
from pgdyno.plan.check import CheckedSet, MetaLoader
from pgdyno.plan.load import Plan
from pgdyno.plan.model import MatrixSpec
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.server import effective_settings, file_errors
from pgdyno.postgres.settings import SettingMeta, load_settings_meta
from pgdyno.records import Event, RunCell
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import NewComparison, RunOutcome
from pgdyno.results.interface import ComparisonsBackend
from pgdyno.stats.analysis import SWITCHED
from pgdyno.undo.host import AppliedKnob, HostChanges, ensure_clean, pending_elsewhere


def effective_pg(client: Client, names: list[str]) -> dict[str, str]:
    """The values in effect, as PostgreSQL shows them; errors in the files are fatal."""
    if not names:
        return {}  # pg_file_settings may need a privilege a baseline set does not
    errors = [e for e in file_errors(client) if e.name in names]
    if errors:
        raise UsageError(
            f"PostgreSQL did not accept {errors[0].name}: {errors[0].error}; fix the plan."
        )
    found = {n: s for n, s in effective_settings(client, names).items() if n in names}
    pending = [n for n, s in found.items() if s.pending_restart]
    if pending:
        raise ClusterError(f"settings {', '.join(pending)} still wait for a restart.")
    return {n: s.shown for n, s in found.items()}


@dataclass(frozen=True)
class CompareOutcome:
    comparison_id: int
    session_id: int
    runs: int  # runs made by this invocation
    skipped: int  # cells already finished by an earlier invocation (--resume)
    rounds: RoundLog  # the rounds' orders and durations, and why they stopped
    # Every run of the comparison as judged in memory (an earlier invocation's too, on
    # --resume), and the analysis of them: the store was written, not read back, to judge.
    outcomes: tuple[RunOutcome, ...] = ()
    # Twin servers: what the idle twins did during each set's runs (pgdyno.experiment.twin_sets)
    idle: tuple[IdleShare, ...] = ()
    # `[matrix] capacity_p99`: each set's capacity sweep (pgdyno.experiment.capacity_sets)
    sweeps: tuple[SetSweep, ...] = ()


def _key(cell: RunCell) -> tuple[str, int, int, int]:
    return (cell.workload, cell.scale, cell.clients, cell.repeat)


def _todo(
    spec: BenchSpec, scales: list[int], host: HostFacts, repeat: int, name: str, done: set[Any]
) -> list[RunCell]:
    """The cells of one set and repeat not yet finished by an earlier invocation."""
    cells = _cells(spec, scales, host.cpu_count, repeat)
    return [c for c in cells if (name, *_key(c)) not in done]


def _cells(spec: BenchSpec, scales: list[int], cpus: int, repeat: int) -> list[RunCell]:
    one = expand(spec.model_copy(update={"repeats": 1}), scales, cpus)
    return [replace(cell, repeat=repeat) for cell in one]


_Done = set[tuple[str, str, int, int, int]]


@dataclass(frozen=True)
class _Earlier:
    """For --resume: the last comparison of this very plan, its scales, its finished cells and
    its runs (read once, to judge them with this invocation's in memory)."""

    comparison_id: int
    scales: list[int]
    done: _Done
    outcomes: list[RunOutcome]
    rounds: RoundHistory | None = None  # its rounds as stored: the design and seed to go on with


def _earlier(comparisons: ComparisonsBackend, plan: Plan) -> _Earlier:
    earlier = comparisons.latest(plan.digest)
    if earlier is None:
        raise UsageError(
            f"no earlier run of this plan ({plan.path}, unchanged) to resume: run it "
            "without --resume."
        )
    return _Earlier(earlier.id, list(earlier.scales), comparisons.finished_cells(earlier.id),
                    comparisons.runs(earlier.id), earlier.rounds)  # fmt: skip


def new_seed() -> int:
    """A seed for a comparison's orders when none is given (printed and stored: it replays)."""
    return secrets.randbelow(2**31)


# The designs whose orders are drawn from a stored seed (schedule.Balanced, twin servers'
# balanced orders, switching.PairOrders): --resume goes on with the same seed.
SEEDED = ("balanced", "twins", "switching")


def design_for(seed: int | None, earlier: RoundHistory | None, resuming: bool) -> Design:
    """The design of a comparison's orders: balanced, drawn from `seed` (a new one when None);
    on --resume the earlier invocation's seed, so the rounds go on with the same sequence (its
    next rounds); a comparison stored before issue 33 goes on rotating.

    >>> design_for(5, None, False)
    Balanced(seed=5, name='balanced')
    >>> stored = RoundHistory("fixed", 2, (), 60.0, "repeats", design="balanced", seed=9)
    >>> old = RoundHistory("fixed", 2, (), 60.0, "repeats")  # stored before issue 33
    >>> design_for(None, stored, True), design_for(None, old, True)
    (Balanced(seed=9, name='balanced'), Rotation(name='rotation', seed=None))
    >>> design_for(None, replace(stored, design="switching", seed=4), True).seed
    4
    >>> design_for(5, stored, True)
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: --seed 5 is not the seed 9 of the comparison to resume: omit it.
    """
    if not resuming:
        return Balanced(new_seed() if seed is None else seed)
    stored = earlier.seed if earlier is not None and earlier.design in SEEDED else None
    if seed is not None and stored is not None and seed != stored:
        raise UsageError(
            f"--seed {seed} is not the seed {stored} of the comparison to resume: omit it."
        )
    if stored is not None:
        return Balanced(stored)
    if earlier is not None and earlier.design == "rotation":
        return Rotation()  # stored before issue 33 (or rotated): the same orders go on
    return Balanced(new_seed() if seed is None else seed)  # no round finished before


@dataclass(frozen=True)
class CompareJob:
    """What `run_compare` runs: the plan, its sets as checked, the bench spec of its matrix,
    whether it resumes the newest earlier comparison of the plan, and the command line to
    record with the session."""

    plan: Plan
    checked: list[CheckedSet]
    spec: BenchSpec
    resume: bool
    command: list[str]
    seed: int | None = None  # --seed: the orders' seed (None: drawn, or the resumed one's)
    # `[matrix] capacity_p99`: every set swept on capacity after the TPS rounds
    capacity: CapacityPlan | None = None


# Connects to a set's target for its runs (experiment/bench.py `connected`, its spec bound).
type Connect = Callable[[Target], AbstractContextManager[Connected]]


@dataclass(frozen=True)
class InEffect:
    """A set in effect: the target connected and ready to run cells, and the settings it runs
    with as the server and the kernel show them."""

    ready: Connected
    effective: dict[str, Any]


class SetInEffect:
    """Puts a configuration set in effect on the target. `applied(checked, connect)` is a
    context manager that applies the set's host settings (through the journal, old values
    first), makes its PostgreSQL settings current (the switcher: a reload, or a restart only
    when a changed setting needs it), connects, reads every value back (settings the server
    refused or that still wait for a restart are fatal), yields the set in effect, and on
    leaving undoes its host settings. Its PostgreSQL settings stay until the next set replaces
    them (a sandbox is not restarted for nothing) and the switcher undoes them at the end. On
    an error nothing is undone here: the comparison's stack stops the servers, then restores
    the host (huge pages a server holds cannot be released)."""

    def __init__(self, changes: HostChanges, switcher: SetSwitcher, log: Callable[[str], None]):
        self.changes = changes
        self.switcher = switcher
        self.log = log
        self.holds_huge_pages = False  # the set in effect reserved huge pages (vm.nr_hugepages)

    @contextmanager
    def applied(self, checked_set: CheckedSet, connect: Connect) -> Iterator[InEffect]:
        host = self._apply_host_settings(checked_set)
        with connect(self.switcher.use(checked_set)) as ready:
            yield InEffect(ready, self.read_back(ready, checked_set, host))
        self._undo_host_settings()

    def _apply_host_settings(self, checked_set: CheckedSet) -> list[AppliedKnob]:
        reserves = any(knob.name == "vm.nr_hugepages" for knob, _ in checked_set.host)
        if self.holds_huge_pages or reserves:
            # The kernel cannot release huge pages a running server holds, and reserves them
            # more easily without a server's shared memory in the way: stop it first (the set
            # starts it again).
            self.switcher.close()
        self.holds_huge_pages = reserves
        self.changes.restore()  # anything left of an earlier set, before anything else
        applied = [self.changes.apply(knob, value) for knob, value in checked_set.host]
        for a in applied:
            if not a.took_effect:
                self.log(f"{a.knob}: asked for {a.requested}, the kernel shows {a.effective}")
        return applied

    def _undo_host_settings(self) -> None:
        if self.holds_huge_pages:  # the server goes first: it holds the pages
            self.switcher.close()
            self.holds_huge_pages = False
        self.changes.restore()

    @staticmethod
    def read_back(
        ready: Connected, checked_set: CheckedSet, applied: list[AppliedKnob]
    ) -> dict[str, Any]:
        """The settings in effect for this set, as the server and the kernel show them;
        settings the server refused or that still wait for a restart are fatal."""
        return {
            "pg": effective_pg(ready.client, sorted(checked_set.pg)),
            "host": {str(a.knob): a.effective for a in applied},
            "postgres": ready.info.version,
        }


def run_compare(
    job: CompareJob,
    host: HostFacts,
    ctx: RunContext,
    *,
    sandboxes: Environment,
    meta_for: MetaLoader,
    switcher: SetSwitcher | None = None,
) -> CompareOutcome:
    """Run the plan's sets interleaved; `sandboxes` is the work directory the sandboxes and the
    host-settings journal live in; `switcher` puts each set in effect (default: the sandbox)."""
    plan, checked, spec, command = job.plan, job.checked, job.spec, job.command
    if not checked:
        raise UsageError(f"{plan.path} has no configuration set to run: add a set to the plan.")
    session_target = f"compare {plan.name}"
    ctx = replace(ctx, history_target=session_target)  # every set's runs size the next's log
    comparisons = ctx.store.comparisons
    journal, proc_root, sys_root = sandboxes.journal_path, ctx.proc_root, ctx.sys_root
    ensure_clean(journal, proc_root=proc_root, sys_root=sys_root)
    elsewhere = pending_elsewhere(journal, proc_root=proc_root, sys_root=sys_root)
    if elsewhere is not None and any(c.host for c in checked):  # now, not after the baseline
        raise elsewhere.refusal()
    earlier = _earlier(comparisons, plan) if job.resume else None
    dataset_bytes = expected_dataset_bytes(spec, host)
    choice = _chosen(
        job, meta_for, (host.memory_bytes, dataset_bytes), earlier,
        None if switcher is None else "the comparison runs on one existing server (--dsn)",
    )  # fmt: skip
    if switcher is None and choice.design == "twins":
        switcher = TwinSwitcher(sandboxes, checked, ctx.log)
    switcher = switcher or SandboxSwitcher(sandboxes, meta_for, ctx.log, dataset_bytes)
    design = design_for(job.seed, earlier.rounds if earlier else None, job.resume)
    if choice.design == "twins" and isinstance(design, Balanced):  # stored as what ran
        design = Balanced(design.seed, name=choice.design)
    schedule = Schedule(tuple(checked), design)
    with ExitStack() as stack:
        changes = stack.enter_context(HostChanges(journal, proc_root=proc_root, sys_root=sys_root))
        # Servers stop (or are restored) before the host settings go back (huge pages in use
        # cannot be released).
        stack.callback(switcher.close)
        session_id = stack.enter_context(
            recorded_session(ctx, command, session_target, host, {"plan": plan.name})
        )
        sets = SetInEffect(changes, switcher, ctx.log)
        if earlier is not None:
            comparison_id, scales = earlier.comparison_id, earlier.scales
            comparisons.resume(comparison_id)  # running again, owned by this process
            ctx.log(f"resuming comparison {comparison_id} (this is session {session_id})")
        else:  # the target and scales before the first run: the first set's server tells
            scales = _first_scales(sets, schedule.round(1)[0], spec, host, ctx)
            comparison_id = _create_comparison(comparisons, plan, checked, scales)
            ctx.log(
                f"comparison {comparison_id} (session {session_id}): "
                f"`pgdyno runs list --comparison {comparison_id}` lists its runs"
            )
        for line in _design_lines(choice, design, plan):
            ctx.log(line)
        stack.enter_context(finished_as(partial(comparisons.finish, comparison_id)))
        run = _CompareRun(
            plan=plan, checked=checked, spec=spec, ctx=ctx, host=host, sets=sets,
            session_id=session_id, comparison_id=comparison_id, scales=scales,
            done=earlier.done if earlier else set(),
            outcomes=list(earlier.outcomes) if earlier else [],
        )  # fmt: skip

        if earlier is None:
            _name_design(comparisons, comparison_id, run.rounds, choice, design)

        def after(round_no: int) -> bool:
            stop = run.enough(round_no)
            comparisons.record_rounds(comparison_id, run.rounds.history())
            return stop

        if choice.inside:
            _switched(run, plan.spec.matrix, design, schedule.round(1)[0], after,
                      earlier.rounds if earlier else None)  # fmt: skip
        else:
            run.plan_progress()
            RoundLoop(schedule, run.rounds, run.run_set, after, lambda c: c.name).run()
        sweeps = () if job.capacity is None else _sweeps(run, job, job.capacity, design)
    return CompareOutcome(comparison_id, session_id, run.made, run.skipped, run.rounds,
                          tuple(run.outcomes), idle_shares(run.idle_events),
                          sweeps)  # fmt: skip


def _sweeps(
    run: _CompareRun, job: CompareJob, plan: CapacityPlan, design: Design
) -> tuple[SetSweep, ...]:
    """Every set swept on capacity, their steps interleaved in the comparison's design, each
    step's set put in effect as for a run."""
    spec = step_spec(run.spec, plan)
    connect = partial(connected, spec, host=run.host, ctx=run.ctx)

    @contextmanager
    def apply(checked_set: CheckedSet) -> Iterator[Connected]:
        with run.sets.applied(checked_set, connect) as now:
            yield now.ready

    sweeps = SweepsJob(
        tuple(run.checked), run.spec, run.scales, plan, closed_rates(run.outcomes), design,
        job.command, (run.plan.name, run.comparison_id),
        run.ctx.store.comparison_sweeps(run.comparison_id),  # --resume goes on with them
    )  # fmt: skip
    return sweep_sets(sweeps, apply, run.host, run.ctx)


# -- Switching inside one run (pgdyno.experiment.switched_run) -------------------------------------


def resumed_design(rounds: RoundHistory | None, measured: bool) -> str | None:
    """The design (a `Choice`'s) of the comparison --resume goes on with, as its stored rounds
    name it: "inside" (switched inside one run), "twins", or "runs" (one run per set and round
    on one server; twin servers stored before they were named so); None when nothing was
    measured yet (the plan decides, as for a new comparison). Runs stored without a finished
    round ran one per set and round (a switched run stores its rounds' periods and names its
    design at the same look).

    >>> h = RoundHistory("adaptive", 3, (), 30.0, None, design="switching", seed=1)
    >>> resumed_design(h, True), resumed_design(replace(h, design="twins"), True)
    ('inside', 'twins')
    >>> resumed_design(replace(h, design="balanced"), True), resumed_design(None, True)
    ('runs', 'runs')
    >>> resumed_design(None, False) is None
    True
    """
    if rounds is None:
        return "runs" if measured else None
    return {"switching": "inside", "twins": "twins"}.get(rounds.design, "runs")


def _chosen(
    job: CompareJob, meta_for: MetaLoader, memory: tuple[int, int], earlier: _Earlier | None,
    one_server: str | None,
) -> Choice:  # fmt: skip
    """The design this invocation runs (`twin_sets.choose`); on --resume the one the
    comparison ran, or a refusal in one sentence (`same_design`)."""
    resumed = resumed_design(earlier.rounds, bool(earlier.outcomes)) if earlier else None
    choice = choose(job.plan, job.checked, meta_for, job.spec, memory, _cannot_switch(resumed),
                    one_server)  # fmt: skip
    if earlier is not None:
        same_design(resumed, choice, earlier.comparison_id)
    return choice


def _name_design(
    comparisons: ComparisonsBackend, comparison_id: int, log: RoundLog, choice: Choice,
    design: Design,
) -> None:  # fmt: skip
    """A new comparison switched inside one run or on twins is stored with its design's name
    before its first round ends, so that a kill in that round resumes in the same design."""
    if choice.design != "runs":
        named = SWITCHED if choice.inside else design.name
        comparisons.record_rounds(
            comparison_id, replace(log.history(), design=named, seed=design.seed)
        )


def _cannot_switch(resumed: str | None) -> str | None:
    """Why this invocation runs one run per set and round whatever the plan qualifies for: it
    resumes a comparison that ran so."""
    if resumed == "runs":
        return "--resume goes on with one run per set and round, as the comparison ran"
    return None


def same_design(resumed: str | None, choice: Choice, comparison_id: int) -> None:
    """Refuses (one sentence) to resume a comparison in another design than it ran: its
    rounds would mix periods of one run with whole runs, or twins with one server.

    >>> same_design("inside", Choice("inside", "x"), 3)
    >>> same_design("twins", Choice("runs", "twins: the comparison runs on one server"), 3)
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: comparison 3 ran on twin servers and cannot go on so (twins: the comparison runs on one server): run the plan without --resume.
    """  # noqa: E501
    if resumed is None or resumed == choice.design:
        return
    ran = {"inside": "switched inside one run", "twins": "on twin servers"}.get(
        resumed, "one run per set and round"
    )
    raise UsageError(
        f"comparison {comparison_id} ran {ran} and cannot go on so ({choice.reason}): "
        "run the plan without --resume."
    )


def _switched(
    run: _CompareRun, matrix: MatrixSpec, design: Design, first: CheckedSet,
    after: Callable[[int], bool], earlier: RoundHistory | None,
) -> None:  # fmt: skip
    """The comparison as one pgbench run, the sets switched inside it: the first set applied
    as for a run (host and server settings, read back), then each period's set put in effect
    through the same switcher and read back. On --resume (`earlier`: the rounds stored) the
    rounds go on after the earlier invocation's, their orders and durations kept in the log."""
    cell = _cells(run.spec, run.scales, run.host.cpu_count, 1)[0]
    done = (max([earlier.rounds if earlier else 0, *(o.repeat for o in run.outcomes)]),
            len(run.outcomes))  # fmt: skip
    if run.spec.adaptive is None and done[0] >= run.spec.repeats:
        return  # every round ran before (--resume): nothing to switch
    if earlier is not None and earlier.rounds:
        run.rounds.orders = [list(order) for order in earlier.order]
        run.rounds.durations = [earlier.seconds / earlier.rounds] * earlier.rounds
    connect = partial(connected, run.spec, host=run.host, ctx=run.ctx)
    with run.sets.applied(first, connect) as now:
        run.ctx.store.comparisons.record_effective(run.comparison_id, first.name, now.effective)

        def switch(checked: CheckedSet) -> dict[str, Any]:
            run.sets.switcher.use(checked)
            return SetInEffect.read_back(now.ready, checked, [])

        job = SwitchJob(
            tuple(run.checked), cell, run.spec, run.ctx, (run.session_id, run.comparison_id),
            (matrix.period, matrix.burn_in), design.seed or 0, switch, done,
        )  # fmt: skip
        engine = SwitchedRun(job, run.outcomes)
        try:
            engine.run(now.ready, run.rounds, after, first.name)
        finally:
            run.made += engine.made


def _design_lines(choice: Choice, design: Design, plan: Plan) -> list[str]:
    """What the log says of the design as the comparison starts: twins, the orders, and what
    runs this short cannot show (`plan_slow_settings`, as `plan check` and the result say it)."""
    lines = [choice.note()] if choice.design == "twins" else []
    lines.append(
        _design_note(design) if not choice.inside
        else f"{choice.note()}; orders drawn from seed {design.seed} (`--seed {design.seed}` "
        "replays them)"
    )  # fmt: skip
    slow = plan_slow_settings(plan)
    return lines if slow is None else [*lines, slow]


def _design_note(design: Design) -> str:
    """The log line that says how the rounds are ordered and how to replay them.

    >>> _design_note(Balanced(7))
    'orders: balanced design (carry-over balanced), seed 7; `--seed 7` replays them'
    """
    if design.seed is None:
        return f"orders: {design.name} (as the comparison resumed was ordered)"
    return (
        f"orders: {design.name} design (carry-over balanced), seed {design.seed}; "
        f"`--seed {design.seed}` replays them"
    )


def _first_scales(
    sets: SetInEffect, first: CheckedSet, spec: BenchSpec, host: HostFacts, ctx: RunContext
) -> list[int]:
    """The scales of the comparison, chosen once from the first set's server (its memory for
    shared buffers, the free disk under its data) before any run; said in the log."""
    with sets.applied(first, partial(connected, spec, host=host, ctx=ctx)) as now:
        ready = now.ready
        choices = resolve_scales(spec, host, ready.info.shared_buffers_bytes, ready.data_path)
    for choice in choices:
        ctx.log(choice.note or choice.describe())
    return [c.scale for c in choices]


def _create_comparison(
    comparisons: ComparisonsBackend, plan: Plan, checked: list[CheckedSet], scales: list[int]
) -> int:
    return comparisons.create(
        NewComparison(
            name=plan.name, plan_path=str(plan.path), plan_digest=plan.digest,
            plan_text=plan.text, mode=plan.spec.mode, baseline=plan.spec.baseline_name,
            scales=tuple(scales), sets=tuple((c.name, c.requested()) for c in checked),
        )
    )  # fmt: skip


@dataclass
class _CompareRun:
    """One `compare` invocation in progress: what it was given (the comparison and its scales
    resolved before the first run) and what it has done so far, the runs judged in memory.
    `run_set` runs one set's cells of one repeat."""

    plan: Plan
    checked: list[CheckedSet]
    spec: BenchSpec
    ctx: RunContext
    host: HostFacts
    sets: SetInEffect
    session_id: int
    comparison_id: int
    scales: list[int]
    done: _Done  # cells finished by an earlier invocation (--resume)
    outcomes: list[RunOutcome]  # every run so far, as the analysis takes it
    made: int = 0
    skipped: int = 0  # cells finished earlier and not run again (--resume)
    rounds: RoundLog = field(init=False)
    # Twin servers: each run's `idle_twin` events (run id, set), for the idle twins' share
    idle_events: list[tuple[int, str, Event]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rounds = RoundLog(self.spec.adaptive)

    def enough(self, round_no: int) -> bool:
        """Whether the rounds end after this one: all repeats done, or (adaptive) the stopping
        rule says so on the runs so far (in memory)."""
        adaptive = self.spec.adaptive
        if adaptive is None:
            return round_no >= self.spec.repeats
        plan = self.plan.spec
        judged = RoundPlan(tuple(c.name for c in self.checked), plan.baseline_name, plan.mode)
        judge_round(self.outcomes, judged, adaptive, self.rounds, round_no)
        return self.rounds.decision is not None and self.rounds.decision.stop

    def planned_rounds(self) -> int:
        """Rounds the progress bar plans for: the repeats, or as many as the budget could hold
        (an upper bound: adaptive rounds usually stop sooner)."""
        adaptive = self.spec.adaptive
        if adaptive is None:
            return self.spec.repeats
        cells = len(_cells(self.spec, self.scales, self.host.cpu_count, 1))
        return adaptive.most_rounds(seconds_per_run(self.spec) * cells * len(self.checked))

    def run_set(self, checked_set: CheckedSet, repeat: int) -> None:
        cells = _todo(self.spec, self.scales, self.host, repeat, checked_set.name, self.done)
        self.skipped += len(_cells(self.spec, self.scales, self.host.cpu_count, repeat)) - len(
            cells
        )
        if not cells:  # --resume: an earlier invocation finished this set and repeat
            return
        adaptive = self.spec.adaptive
        of = f"of {self.spec.repeats}" if adaptive is None else "(adaptive)"
        self.ctx.progress.phase(f"set {checked_set.name}, round {repeat} {of}")
        connect = partial(connected, self.spec, host=self.host, ctx=self.ctx)
        with self.sets.applied(checked_set, connect) as now:
            self.ctx.store.comparisons.record_effective(
                self.comparison_id, checked_set.name, now.effective
            )
            self._run_cells(now.ready, checked_set, cells)

    def plan_progress(self) -> None:
        """The runs planned, those an earlier invocation finished counted once, here, so the
        figures shown ("2 runs planned (10 already done)", "run 7 (11/12)", "10 runs were
        finished before") agree however the skipped cells fall among the sets and rounds."""
        spec, cpus = self.spec, self.host.cpu_count
        planned = [(s.name, c) for r in range(1, self.planned_rounds() + 1)
                   for s in self.checked for c in _cells(spec, self.scales, cpus, r)]  # fmt: skip
        earlier = sum((name, *_key(c)) in self.done for name, c in planned)
        if earlier:
            self.ctx.progress.skipped(earlier)
        self.ctx.progress.planned([c for _, c in planned], seconds_per_run(spec))

    def _run_cells(self, ready: Connected, checked_set: CheckedSet, cells: list[RunCell]) -> None:
        numbered = [replace(c, index=self.made + i) for i, c in enumerate(cells)]
        twins = self.sets.switcher
        watch = partial(twins.watch, checked_set.name) if isinstance(twins, TwinSwitcher) else None
        made = run_cells(
            ready, numbered, self.ctx, session_id=self.session_id, watch=watch,
            comparison_id=self.comparison_id, set_name=checked_set.name,
        )  # fmt: skip
        self.idle_events.extend((run_id, checked_set.name, event) for run_id, record in made
                                for event in record.events if event.kind == IDLE_EVENT)  # fmt: skip
        self.outcomes.extend(RunOutcome.of(run_id, record) for run_id, record in made)
        self.made += len(made)


def settings_meta_loader(env: Environment, log: Callable[[str], None]) -> MetaLoader:
    """Reads pg_settings of a version from its sandbox, started for a moment if need be."""
    cache: dict[str, Mapping[str, SettingMeta]] = {}

    def load(binaries: Binaries) -> Mapping[str, SettingMeta]:
        if binaries.version not in cache:
            box = open_sandbox(env, binaries, log)
            with running(env, box, binaries=binaries), connect(box.conninfo()) as client:
                cache[binaries.version] = load_settings_meta(client)
        return cache[binaries.version]

    return load
