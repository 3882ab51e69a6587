"""The compare use case: check a plan, run its sets in rounds, judge them.

The body of `pgdyno compare`, in the library so that `pgdyno tune --verify` runs exactly the
same thing: on the sandbox, or on the existing server `server` names (through
pgdyno.experiment.server_sets). The CLI gives the log and the progress display.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from pgdyno.collect.interference import interference_now, is_flagged
from pgdyno.environment import Environment
from pgdyno.errors import ParseError, StoreError
from pgdyno.experiment.context import ProgressReporter, RemoteTarget, RunContext
from pgdyno.experiment.matrix import bench_spec, with_adaptive
from pgdyno.experiment.server_sets import RemoteServer, ServerOptions, server_sets
from pgdyno.experiment.sets_runner import (
    CompareJob,
    CompareOutcome,
    SetSwitcher,
    run_compare,
    settings_meta_loader,
)
from pgdyno.experiment.storage_sets import expected_dataset_bytes, image_size
from pgdyno.experiment.target import server_address, workdir_lock
from pgdyno.host.disks import device_for_path
from pgdyno.host.machine import read_host
from pgdyno.plan.check import CheckedSet, HostTarget, MetaLoader, check_plan
from pgdyno.plan.load import Plan
from pgdyno.plan.policy import Allowed
from pgdyno.postgres.server_lock import ServerLock, server_lock
from pgdyno.records.interference import Interference
from pgdyno.records.stored import RunOutcome, StoredComparison
from pgdyno.remote.host import remote_host
from pgdyno.stats.analysis import Analysis, Judging, analyse
from pgdyno.store.open import open_results
from pgdyno.textsafe import scrub_argv


@dataclass(frozen=True)
class Executed:
    """A finished comparison: what ran, what is stored, and the verdicts."""

    plan: Plan
    outcome: CompareOutcome
    runs: list[RunOutcome]
    info: StoredComparison
    analysis: Analysis


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


def checked_sets(
    env: Environment, plan: Plan, meta_for: MetaLoader, allowed: Allowed
) -> list[CheckedSet]:
    """The plan checked against the sandbox's versions and the disk of its clusters."""
    env.clusters_dir.mkdir(parents=True, exist_ok=True)
    return check_plan(plan, cache_dir=env.cache_dir, meta_for=meta_for,
                      host=sandbox_host(env, plan, allowed, env.clusters_dir))  # fmt: skip


def sandbox_host(env: Environment, plan: Plan, allowed: Allowed, clusters: Path) -> HostTarget:
    """Where a plan's host settings and storage are checked for the sandbox: the disk under
    `clusters` (its sandboxes' directory, or the nearest existing one above it), root or not,
    the work directory for loop images and the image a storage set gets by default."""
    device = device_for_path(clusters, env.proc_root, env.sys_root)
    host = read_host(env.proc_root, env.sys_root)
    image = image_size(expected_dataset_bytes(bench_spec(plan, host.cpu_count), host))
    return HostTarget(device.disk if device else None, env.is_root, env.proc_root,
                      env.sys_root, allowed, env.data_dir, image)  # fmt: skip


def execute_compare(
    env: Environment,
    request: CompareRequest,
    *,
    log: Callable[[str], None],
    progress: Callable[[], AbstractContextManager[ProgressReporter]],
) -> Executed:
    """Check, run and judge a plan."""
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
        store = stack.enter_context(open_results(env.results))
        shown = stack.enter_context(progress())
        run_ctx = RunContext.of(env, store, log=log, progress=shown, keep_files=request.keep_files)
        run_ctx = replace(run_ctx, remote=remote, server_lock=lock)
        job = CompareJob(plan, checked, spec, request.resume, scrub_argv(["pgdyno", *env.argv]))
        outcome = run_compare(
            job, host, run_ctx, sandboxes=env, meta_for=meta_for, switcher=switcher
        )
    with open_results(env.results) as store:
        runs = store.comparisons.runs(outcome.comparison_id)
        info = store.comparisons.get(outcome.comparison_id)
    if info is None:  # written by run_compare just before: the database changed under us
        raise StoreError(
            f"comparison {outcome.comparison_id} is missing from {env.results} right "
            "after it was stored: check that no other program rewrites the results database."
        )
    judging = Judging(sequential=spec.adaptive is not None)
    analysis = analyse(
        runs, [c.name for c in checked], plan.spec.baseline_name, plan.spec.mode, judging
    )
    return Executed(plan, outcome, runs, info, analysis)


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


def unresolved_failures(runs: list[RunOutcome]) -> list[RunOutcome]:
    """The runs that did not finish and whose cell (set, workload, scale, clients, round) has
    no finished run either: a run interrupted and then made again by `--resume` is not a
    failure of the comparison.

    >>> from pgdyno.records.health import RunHealth
    >>> def run(id, status, repeat):
    ...     return RunOutcome(id, "a", status, "tpcb", 1, 1, repeat, None, None, None,
    ...                       RunHealth(), "18.1")
    >>> [r.id for r in unresolved_failures([run(1, "interrupted", 1), run(2, "ok", 1),
    ...                                     run(3, "failed", 2)])]
    [3]
    """
    finished = {_cell(r) for r in runs if r.status == "ok"}
    return [r for r in runs if r.status != "ok" and _cell(r) not in finished]


def cell_count(runs: list[RunOutcome]) -> int:
    """The runs the comparison planned and made, a run made again on --resume counted once."""
    return len({_cell(r) for r in runs})


def _cell(run: RunOutcome) -> tuple[str | None, str, int, int, int]:
    return (run.set_name, run.workload, run.scale, run.clients, run.repeat)


BUSY_CHECK_S = 2.0  # how long the look at the host's processes before a comparison lasts


def busy_host_check(
    proc_root: Path, cpus: int, limit_pct: float, log: Callable[[str], None]
) -> Interference | None:
    """Before a comparison spends its budget: whether other processes take more of the CPU
    than a run tolerates (each such run is flagged and left out of the verdicts). Says so, with
    the biggest consumers, and returns what it saw; None when the host is quiet enough."""
    try:
        found = interference_now(proc_root, [os.getpid()], cpus, BUSY_CHECK_S)
    except (OSError, ParseError) as exc:
        log(f"the host's processes could not be read before the runs ({exc}): no busy check")
        return None
    if not is_flagged(found, limit_pct):
        return None
    top = ", ".join(f"{command} {pct:.1f}%" for command, pct in found.top) or "-"
    log(
        f"this host is busy: other processes took {found.foreign_cpu_pct:.1f}% of its CPU "
        f"(steal {found.steal_pct:.1f}%) over {BUSY_CHECK_S:.0f} s (top: {top}); runs where "
        f"they take more than {limit_pct:g}% are flagged and left out of the verdicts: stop "
        "them first, or raise --foreign-cpu-limit"
    )
    return found
