"""`compare`: check a plan, run its sets in rounds on the one run loop, judge them in memory.

On the sandbox, or on the existing server `server` names (pgdyno.experiment.server_sets),
here or over SSH. `tune --verify` runs exactly this (pgdyno.lab.verify).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, replace

from pgdyno.environment import Environment
from pgdyno.errors import StoreError
from pgdyno.experiment.capacity_sets import capacity_plan
from pgdyno.experiment.compare import busy_host_check, checked_sets
from pgdyno.experiment.context import RemoteTarget
from pgdyno.experiment.matrix import bench_spec, with_adaptive
from pgdyno.experiment.sandbox_sets import SetSwitcher
from pgdyno.experiment.server_sets import RemoteServer, ServerOptions, server_sets
from pgdyno.experiment.sets_runner import (
    CompareJob,
    CompareOutcome,
    run_compare,
    settings_meta_loader,
)
from pgdyno.experiment.target import server_address, workdir_lock
from pgdyno.host.machine import read_host
from pgdyno.lab.open import Progress, open_lab
from pgdyno.plan.check import CheckedSet, MetaLoader
from pgdyno.plan.load import Plan
from pgdyno.plan.policy import Allowed
from pgdyno.postgres.server_lock import ServerLock, server_lock
from pgdyno.records.capacity import CapacityChange
from pgdyno.records.stored import RunOutcome, StoredComparison
from pgdyno.remote.host import remote_host
from pgdyno.results.open import open_results
from pgdyno.stats.analysis import SWITCHED, Analysis, Judging, analyse
from pgdyno.stats.capacity import against_baseline
from pgdyno.stats.carryover import CarryOverFit, estimates
from pgdyno.textsafe import scrub_argv


@dataclass(frozen=True)
class Executed:
    """A finished comparison: what ran, what is stored, and the verdicts."""

    plan: Plan
    outcome: CompareOutcome
    runs: list[RunOutcome]
    info: StoredComparison
    analysis: Analysis
    # the effect of the set that ran right before, and each set's switch cost
    carryover: tuple[CarryOverFit, ...] = ()
    # `[matrix] capacity_p99`: each set against the baseline on capacity
    capacity: tuple[CapacityChange, ...] = ()


@dataclass(frozen=True)
class CompareRequest:
    """What to compare and how (the options of `pgdyno compare`)."""

    plan: Plan
    allowed: Allowed
    precision: float | None = None
    budget: str | None = None
    resume: bool = False
    keep_files: bool = False
    server: ServerOptions | None = None
    ssh: str | None = None  # the server's host over SSH; `server.dsn` as that host sees it
    foreign_cpu_limit: float | None = None  # --foreign-cpu-limit (over the plan's)
    seed: int | None = None  # --seed: the seed of the orders (None: drawn and printed)


def execute_compare(
    env: Environment, request: CompareRequest, *, log: Callable[[str], None], progress: Progress
) -> Executed:
    """Check, run and judge a plan. The verdicts are those of the runs as the loop kept them
    in memory; the comparison and its runs are read from the store once, to be shown as
    stored."""
    plan = request.plan
    with ExitStack() as stack:
        stack.enter_context(workdir_lock(env))
        remote = None
        if request.ssh is not None and request.server is not None:
            there = stack.enter_context(remote_host(request.ssh, env.runs_dir, log))
            address = server_address(request.server.dsn)
            remote = RemoteTarget(there, address.dsn, "auto")
            request = replace(request, server=replace(
                request.server, dsn=there.tunnel(request.server.dsn),
                remote=RemoteServer(request.ssh, address.dsn, f"{there.name} {address.label}"),
            ))  # fmt: skip
            env = replace(env, proc_root=there.proc_root, sys_root=there.sys_root)
        lock = None if request.server is None else stack.enter_context(_locked(request.server))
        host = read_host(env.proc_root, env.sys_root)
        spec = with_adaptive(bench_spec(plan, host.cpu_count), request.precision, request.budget)
        if request.foreign_cpu_limit is not None:
            spec = spec.model_copy(update={"foreign_cpu_limit_pct": request.foreign_cpu_limit})
        checked, meta_for, switcher = _prepared(env, request, stack, log)
        if remote is None:  # said before the budget is spent (over SSH: not this host's CPU)
            busy_host_check(env.proc_root, host.cpu_count, spec.foreign_cpu_limit_pct, log)
        run_ctx = stack.enter_context(open_lab(
            env, log=log, progress=progress, keep_files=request.keep_files, remote=remote,
            lock=lock,
        ))  # fmt: skip
        seed = request.seed if request.seed is not None else plan.spec.matrix.seed
        job = CompareJob(plan, checked, spec, request.resume, scrub_argv(["pgdyno", *env.argv]),
                         seed, capacity_plan(plan, len(checked)))  # fmt: skip
        outcome = run_compare(
            job, host, run_ctx, sandboxes=env, meta_for=meta_for, switcher=switcher
        )
    judging = Judging(
        sequential=spec.adaptive is not None,
        mixture_rounds=outcome.rounds.mixture_rounds,
        switched=outcome.rounds.design == SWITCHED,
    )
    analysis = analyse(
        list(outcome.outcomes), [c.name for c in checked], plan.spec.baseline_name,
        plan.spec.mode, judging,
    )  # fmt: skip
    runs, info = _stored(env, outcome.comparison_id)
    names = [c.name for c in checked]
    carryover = estimates(outcome.outcomes, names, plan.spec.baseline_name)
    capacity = against_baseline(
        [(s.set_name, s.result) for s in outcome.sweeps], plan.spec.baseline_name
    )
    return Executed(plan, outcome, runs, info, analysis, carryover, tuple(capacity))


def _stored(env: Environment, comparison_id: int) -> tuple[list[RunOutcome], StoredComparison]:
    """The comparison and its runs as stored, for the output."""
    with open_results(env.results) as store:
        runs = store.comparisons.runs(comparison_id)
        info = store.comparisons.get(comparison_id)
    if info is None:  # written by run_compare just before: the database changed under us
        raise StoreError(
            f"comparison {comparison_id} is missing from {env.results} right "
            "after it was stored: check that no other program rewrites the results database."
        )
    return runs, info


def _locked(server: ServerOptions) -> AbstractContextManager[ServerLock]:
    """The existing server's benchmark lock, before anything reads or changes it."""
    address = server_address(server.dsn)
    label = address.label if server.remote is None else server.remote.label
    return server_lock(address.dsn, address.password, label)


def _prepared(
    env: Environment, request: CompareRequest, stack: ExitStack, log: Callable[[str], None]
) -> tuple[list[CheckedSet], MetaLoader, SetSwitcher | None]:
    """The checked sets, the settings loader and the switcher (None: the sandbox's)."""
    if request.server is None:
        meta_for = settings_meta_loader(env, log)  # one loader: pg_settings read once per version
        return checked_sets(env, request.plan, meta_for, request.allowed), meta_for, None
    checked, switcher = stack.enter_context(
        server_sets(request.plan, request.server, env, request.allowed, log)
    )
    return checked, switcher.server.meta_for, switcher
