"""`pgdyno compare`: apply each configuration set, run the matrix, restore, repeat in rounds.

Order: round 1 runs every set (A B C), round 2 again in an order rotated by one (B C A), ...
so slow drift of a shared machine is spread over all sets instead of landing on the last one,
and the verdict compares runs of the same round (`pgdyno.stats.paired`). With a fixed number of
repeats the rounds are counted; with a precision or budget they go on until every comparison is
resolved or the budget is spent (`pgdyno.experiment.rounds`, `pgdyno.stats.stopping`).

Before a set's runs its host settings are applied through the journal (old values written first)
and its PostgreSQL settings are written to the sandbox, which is reloaded, or restarted only
when a changed setting needs it; every value is read back and stored as what was in effect.
Host settings are restored after each set and on every way out; `pgdyno rollback` covers a
crash. What makes a set's PostgreSQL settings current is a `SetSwitcher`: `SandboxSwitcher`
here, or `pgdyno.experiment.server_sets.ServerSwitcher` (ALTER SYSTEM on an existing server,
`compare --dsn`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from pgdyno.changes.alter import refuse_changed_sandbox
from pgdyno.environment import Environment
from pgdyno.errors import ClusterError, UsageError
from pgdyno.experiment.bench import Connected, connected, resolve_scales, run_cells
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import BenchSpec, expand, seconds_per_run
from pgdyno.experiment.rounds import RoundLog, RoundPlan, judge_round, run_rounds
from pgdyno.experiment.session import finished_as, recorded_session
from pgdyno.experiment.storage_sets import SetStorage, expected_dataset_bytes
from pgdyno.experiment.target import Target, open_sandbox, running, sandbox_as_target
from pgdyno.host.machine import HostFacts
from pgdyno.plan.check import CheckedSet, MetaLoader
from pgdyno.plan.load import Plan
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.cluster import Sandbox, taken_ports
from pgdyno.postgres.server import effective_settings, file_errors, reloaded
from pgdyno.postgres.settings import SettingMeta, load_settings_meta
from pgdyno.records import RunCell
from pgdyno.records.stored import NewComparison
from pgdyno.store.interface import ComparisonsBackend
from pgdyno.undo.host import AppliedKnob, HostChanges, ensure_clean, pending_elsewhere


@dataclass
class _Running:
    box: Sandbox
    settings: dict[str, str]


class SetSwitcher(Protocol):
    """Makes a set's PostgreSQL settings current and says where its runs go; `close` undoes
    what it changed (called on every way out, and before huge pages go back)."""

    def use(self, checked: CheckedSet) -> Target: ...

    def close(self) -> None: ...


class SandboxSwitcher:
    """Keeps one sandbox running with the current set's settings; stops what it started."""

    def __init__(
        self, env: Environment, meta_for: MetaLoader, log: Callable[[str], None],
        dataset_bytes: int = 0,
    ) -> None:  # fmt: skip
        self.env = env
        self.meta_for = meta_for
        self.log = log
        self.running: dict[int, _Running] = {}
        # [set.storage]: built on first use, sized for the largest dataset expected
        self.storage = SetStorage(env.data_dir, log, dataset_bytes)

    def use(self, checked: CheckedSet) -> Target:
        return sandbox_as_target(self.box_for(checked))

    def box_for(self, checked: CheckedSet) -> Sandbox:
        binaries = checked.binaries
        box = open_sandbox(self.env, binaries, self.log)
        for major in [m for m in self.running if m != binaries.major]:
            self.running.pop(major).box.stop()  # one server at a time: no competing for RAM
        current = self.running.get(binaries.major)
        storage = checked.spec.storage
        if self.storage.wanted(checked.name, storage):  # another filesystem under the data
            if current is not None:
                self.running.pop(binaries.major).box.stop()
                current = None
            self.storage.arrange(box, checked.name, storage)
        if current is None:
            if box.postmaster_pid() is not None:
                raise ClusterError(
                    f"sandbox {box.root.name} is already running, and compare must restart it "
                    "with each set's settings: stop it with `pgdyno sandbox stop` first."
                )
            self._start(box, checked)
            return box
        changed = {
            name
            for name in current.settings.keys() | checked.pg.keys()
            if current.settings.get(name) != checked.pg.get(name)
        }
        meta = self.meta_for(binaries)
        if any(meta[name].needs_restart for name in changed if name in meta):
            box.stop()
            self._start(box, checked)
        elif changed:
            reloaded(box.conninfo(), None, f"sandbox {box.root.name}",
                     lambda _client: box.reload(checked.pg))  # fmt: skip
            current.settings = dict(checked.pg)
        return box

    def _start(self, box: Sandbox, checked: CheckedSet) -> None:
        refuse_changed_sandbox(box)
        box.start(
            checked.pg, owner_pid=os.getpid(), binaries=checked.binaries,
            taken_ports=taken_ports(self.env.clusters_dir),
        )  # fmt: skip
        self.running[checked.binaries.major] = _Running(box, dict(checked.pg))

    def close(self) -> None:
        try:
            for started in self.running.values():
                started.box.stop()
            self.running.clear()
        finally:
            self.storage.close()  # after the server stopped: nothing holds the filesystems


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


def _earlier(
    comparisons: ComparisonsBackend, plan: Plan
) -> tuple[int | None, list[int] | None, _Done]:
    """For --resume: the last comparison of this very plan, its scales and its finished cells."""
    earlier = comparisons.latest(plan.digest)
    if earlier is None:
        raise UsageError(
            f"no earlier run of this plan ({plan.path}, unchanged) to resume: run it "
            "without --resume."
        )
    return earlier.id, list(earlier.scales), comparisons.finished_cells(earlier.id)


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
    comparisons = ctx.store.comparisons
    journal, proc_root, sys_root = sandboxes.journal_path, ctx.proc_root, ctx.sys_root
    ensure_clean(journal, proc_root=proc_root, sys_root=sys_root)
    elsewhere = pending_elsewhere(journal, proc_root=proc_root, sys_root=sys_root)
    if elsewhere is not None and any(c.host for c in checked):  # now, not after the baseline
        raise elsewhere.refusal()
    comparison_id, scales, done = _earlier(comparisons, plan) if job.resume else (None, None, set())
    switcher = switcher or SandboxSwitcher(
        sandboxes, meta_for, ctx.log, expected_dataset_bytes(spec, host)
    )
    with ExitStack() as stack:
        changes = stack.enter_context(HostChanges(journal, proc_root=proc_root, sys_root=sys_root))
        # Servers stop (or are restored) before the host settings go back (huge pages in use
        # cannot be released).
        stack.callback(switcher.close)
        session_id = stack.enter_context(
            recorded_session(ctx, command, f"compare {plan.name}", host, {"plan": plan.name})
        )
        run = _CompareRun(
            plan=plan, checked=checked, spec=spec, ctx=ctx, host=host, comparisons=comparisons,
            stack=stack, changes=changes, switcher=switcher, session_id=session_id,
            comparison_id=comparison_id, scales=scales, done=done,
        )  # fmt: skip
        if comparison_id is not None:
            comparisons.resume(comparison_id)  # running again, owned by this process
            ctx.log(f"resuming comparison {comparison_id} (this is session {session_id})")
            run.finish_on_exit(comparison_id)

        def after(round_no: int) -> bool:
            stop = run.enough(round_no)
            if run.comparison_id is not None:
                comparisons.record_rounds(run.comparison_id, run.rounds.history())
            return stop

        run_rounds(checked, run.rounds, run.run_set, after, lambda c: c.name)
    if run.comparison_id is None:  # only when the plan had no set to run
        raise UsageError(f"{plan.path} has no configuration set to run: add a set to the plan.")
    return CompareOutcome(run.comparison_id, session_id, run.made, run.skipped, run.rounds)


@dataclass
class _CompareRun:
    """One `compare` invocation in progress: what it was given, what it holds open, and what
    it has learnt and done so far. `run_set` runs one set's cells of one repeat in steps."""

    plan: Plan
    checked: list[CheckedSet]
    spec: BenchSpec
    ctx: RunContext
    host: HostFacts
    comparisons: ComparisonsBackend
    stack: ExitStack  # closes the sandboxes, restores the host, finishes the records
    changes: HostChanges
    switcher: SetSwitcher
    session_id: int
    comparison_id: int | None  # None until the first set is connected (unless resumed)
    scales: list[int] | None  # None until the first set's server tells the memory size
    done: _Done  # cells finished by an earlier invocation (--resume)
    made: int = 0
    skipped: int = 0  # cells finished earlier and not run again (--resume)
    announced: int = 0  # of those, told to the progress display
    planned: bool = False
    holds_huge_pages: bool = False  # the last set reserved huge pages (vm.nr_hugepages)
    rounds: RoundLog = field(init=False)

    def __post_init__(self) -> None:
        self.rounds = RoundLog(self.spec.adaptive)

    def enough(self, round_no: int) -> bool:
        """Whether the rounds end after this one: all repeats done, or (adaptive) the stopping
        rule says so on what is stored so far."""
        adaptive = self.spec.adaptive
        if adaptive is None:
            return round_no >= self.spec.repeats
        if self.comparison_id is None:
            return True  # nothing was connected: nothing to judge
        plan = self.plan.spec
        judged = RoundPlan(tuple(c.name for c in self.checked), plan.baseline_name, plan.mode)
        runs = self.comparisons.runs(self.comparison_id)
        judge_round(runs, judged, adaptive, self.rounds, round_no)
        return self.rounds.decision is not None and self.rounds.decision.stop

    def planned_rounds(self) -> int:
        """Rounds the progress bar plans for: the repeats, or as many as the budget could hold
        (an upper bound: adaptive rounds usually stop sooner)."""
        adaptive = self.spec.adaptive
        if adaptive is None:
            return self.spec.repeats
        cells = len(_cells(self.spec, self.scales or [1], self.host.cpu_count, 1))
        return adaptive.most_rounds(seconds_per_run(self.spec) * cells * len(self.checked))

    def finish_on_exit(self, comparison_id: int) -> None:
        self.stack.enter_context(finished_as(partial(self.comparisons.finish, comparison_id)))

    def run_set(self, checked_set: CheckedSet, repeat: int) -> None:
        if self._finished_earlier(checked_set.name, repeat):
            return
        applied = self._apply_host_settings(checked_set)
        target = self.switcher.use(checked_set)
        adaptive = self.spec.adaptive
        of = f"of {self.spec.repeats}" if adaptive is None else "(adaptive)"
        self.ctx.progress.phase(f"set {checked_set.name}, round {repeat} {of}")
        with connected(self.spec, target, self.host, self.ctx) as ready:
            comparison_id, scales = self._start_comparison(ready)
            cells = self._cells_to_run(scales, checked_set.name, repeat)
            effective = self._read_back_settings(ready, checked_set, applied)
            self.comparisons.record_effective(comparison_id, checked_set.name, effective)
            self._run_cells(ready, checked_set, cells, comparison_id)

    def _finished_earlier(self, name: str, repeat: int) -> bool:
        """With --resume: whether this set and repeat have no cell left; counted as skipped."""
        scales = self.scales
        if scales is None or _todo(self.spec, scales, self.host, repeat, name, self.done):
            return False
        self._skip(len(_cells(self.spec, scales, self.host.cpu_count, repeat)))
        return True

    def _skip(self, count: int) -> None:
        """Cells an earlier invocation finished: done, not remaining. Once the progress is
        planned, its count of them already holds every one (see _plan_progress)."""
        self.skipped += count
        if not self.planned:
            self.announced += count
            self.ctx.progress.skipped(count)

    def _apply_host_settings(self, checked_set: CheckedSet) -> list[AppliedKnob]:
        reserves = any(knob.name == "vm.nr_hugepages" for knob, _ in checked_set.host)
        if self.holds_huge_pages or reserves:
            # The kernel cannot release huge pages a running server holds, and reserves them
            # more easily without a server's shared memory in the way: stop it first (the set
            # starts it again).
            self.switcher.close()
        self.holds_huge_pages = reserves
        self.changes.restore()  # the previous set's host settings, before anything else
        applied = [self.changes.apply(knob, value) for knob, value in checked_set.host]
        for a in applied:
            if not a.took_effect:
                self.ctx.log(f"{a.knob}: asked for {a.requested}, the kernel shows {a.effective}")
        return applied

    def _start_comparison(self, ready: Connected) -> tuple[int, list[int]]:
        """On the first connected set: choose the scales, record the comparison, plan progress."""
        if self.scales is None:
            choices = resolve_scales(
                self.spec, self.host, ready.info.shared_buffers_bytes, ready.data_path
            )
            for choice in choices:
                self.ctx.log(choice.note or choice.describe())
            self.scales = [c.scale for c in choices]
        if self.comparison_id is None:
            self.comparison_id = self._create_comparison(self.scales)
            self.finish_on_exit(self.comparison_id)
            self.ctx.log(
                f"comparison {self.comparison_id} (session {self.session_id}): "
                f"`pgdyno runs list --comparison {self.comparison_id}` lists its runs"
            )
        if not self.planned:
            self.planned = True
            self._plan_progress(self.scales)
        return self.comparison_id, self.scales

    def _create_comparison(self, scales: list[int]) -> int:
        plan = self.plan
        return self.comparisons.create(
            NewComparison(
                name=plan.name, plan_path=str(plan.path), plan_digest=plan.digest,
                plan_text=plan.text, mode=plan.spec.mode, baseline=plan.spec.baseline_name,
                scales=tuple(scales), sets=tuple((c.name, c.requested()) for c in self.checked),
            )
        )  # fmt: skip

    def _plan_progress(self, scales: list[int]) -> None:
        """The runs planned, those an earlier invocation finished counted once, here, so the
        figures shown ("2 runs planned (10 already done)", "run 7 (11/12)", "10 runs were
        finished before") agree however the skipped cells fall among the sets and rounds."""
        spec, cpus = self.spec, self.host.cpu_count
        planned = [(s.name, c) for r in range(1, self.planned_rounds() + 1)
                   for s in self.checked for c in _cells(spec, scales, cpus, r)]  # fmt: skip
        earlier = sum((name, *_key(c)) in self.done for name, c in planned)
        if earlier > self.announced:
            self.ctx.progress.skipped(earlier - self.announced)
            self.announced = earlier
        self.ctx.progress.planned([c for _, c in planned], seconds_per_run(spec))

    def _cells_to_run(self, scales: list[int], name: str, repeat: int) -> list[RunCell]:
        cells = _todo(self.spec, scales, self.host, repeat, name, self.done)
        self._skip(len(_cells(self.spec, scales, self.host.cpu_count, repeat)) - len(cells))
        return cells

    def _read_back_settings(
        self, ready: Connected, checked_set: CheckedSet, applied: list[AppliedKnob]
    ) -> dict[str, Any]:
        """The settings in effect for this set, as the server and the kernel show them."""
        return {
            "pg": effective_pg(ready.client, sorted(checked_set.pg)),
            "host": {str(a.knob): a.effective for a in applied},
            "postgres": ready.info.version,
        }

    def _run_cells(
        self, ready: Connected, checked_set: CheckedSet, cells: list[RunCell], comparison_id: int
    ) -> None:
        numbered = [replace(c, index=self.made + i) for i, c in enumerate(cells)]
        self.made += len(
            run_cells(
                ready,
                numbered,
                self.ctx,
                session_id=self.session_id,
                comparison_id=comparison_id,
                set_name=checked_set.name,
            )
        )


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
