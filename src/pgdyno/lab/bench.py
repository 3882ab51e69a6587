"""`bench`: run a pgbench matrix on the sandbox or an existing server (here or over SSH), store
every run, and say what the bench left on the server."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field

from pgdyno.environment import Environment
from pgdyno.errors import ConnectionFailed, PgdynoError
from pgdyno.experiment.bench import BenchOutcome, run_bench
from pgdyno.experiment.context import RemoteTarget, RunContext
from pgdyno.experiment.matrix import BenchSpec
from pgdyno.experiment.target import (
    Target,
    bench_target,
    remote_server_target,
    server_address,
)
from pgdyno.host.machine import HostFacts, read_host
from pgdyno.lab.open import Progress, open_lab
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.footprint import (
    BENCH_DB,
    Leftover,
    PgdynoObject,
    bench_leftovers,
    server_objects,
)
from pgdyno.postgres.server_lock import ServerLock, server_lock
from pgdyno.records.stored import StoredRun
from pgdyno.remote.host import remote_host
from pgdyno.results.open import open_results
from pgdyno.textsafe import scrub_argv


@dataclass(frozen=True)
class BenchRequest:
    """What to run and where (the options of `pgdyno bench`, parsed)."""

    spec: BenchSpec
    binaries: Binaries
    dsn: str | None = None  # an existing server; None: the sandbox
    settings: Mapping[str, str] = field(default_factory=dict)  # --set, for the sandbox
    keep_files: bool = False
    ssh: str | None = None  # the server's host over SSH (with dsn)
    driver: str = "auto"  # where pgbench runs over SSH
    remote_pgbench: str | None = None
    stored: bool = False  # read every run back as stored (for --json)


@dataclass(frozen=True)
class BenchDone:
    """A finished bench: its runs, where it ran, what it left on the server (None: not
    readable), and with `stored` the runs as the store keeps them."""

    outcome: BenchOutcome
    target: str  # the target's label
    left: list[Leftover] | None
    stored: list[StoredRun | None]


def bench(
    env: Environment, request: BenchRequest, *, log: Callable[[str], None], progress: Progress
) -> BenchDone:
    """Open the target and the lab, run the matrix, and look at what it left behind."""
    with opened(env, request, log=log, progress=progress) as (target, host, run_ctx):
        before = objects_on(target, log)
        command = scrub_argv(["pgdyno", *env.argv])
        outcome = run_bench(request.spec, target, host, run_ctx, command=command)
        left = left_by(outcome, target, before, log)
    stored: list[StoredRun | None] = []
    if request.stored:
        with open_results(env.results) as store:
            stored = [store.get_run(run_id) for run_id, _ in outcome.records]
    return BenchDone(outcome, target.label, left, stored)


@contextmanager
def opened(
    env: Environment, request: BenchRequest, *, log: Callable[[str], None], progress: Progress
) -> Iterator[tuple[Target, HostFacts, RunContext]]:
    """The target of `request` (the sandbox, or `--dsn` here or over SSH, holding an existing
    server's benchmark lock), its host's facts, and the lab open on it, for the block."""
    with ExitStack() as stack:
        remote = None
        dsn = request.dsn
        if request.ssh is not None and dsn is not None:
            there = stack.enter_context(remote_host(request.ssh, env.runs_dir, log))
            remote = RemoteTarget(there, server_address(dsn).dsn, request.driver,
                                  request.remote_pgbench)  # fmt: skip
            target = remote_server_target(there, dsn, request.binaries)
            host = read_host(there.proc_root, there.sys_root)
        else:
            target = stack.enter_context(
                bench_target(env, dsn, request.binaries, request.settings, log)
            )
            host = read_host(env.proc_root, env.sys_root)
        lock = None if dsn is None else stack.enter_context(_lock(target))
        run_ctx = stack.enter_context(open_lab(
            env, log=log, progress=progress, keep_files=request.keep_files, remote=remote,
            lock=lock,
        ))  # fmt: skip
        yield target, host, run_ctx


def _lock(target: Target) -> AbstractContextManager[ServerLock]:
    """An existing server's benchmark lock: one benchmark at a time on a server."""
    return server_lock(target.dsn, target.password, target.label)


def objects_on(target: Target, log: Callable[[str], None]) -> list[PgdynoObject] | None:
    """pgdyno's objects on the target now (None, with a line saying so, when unreadable)."""
    try:
        return server_objects(target.dsn, target.password)
    except ConnectionFailed:
        return None  # the bench itself says why it cannot connect, in its one sentence
    except PgdynoError as exc:
        log(f"what pgdyno leaves on {target.label} is not reported: {exc}")
        return None


def left_by(
    outcome: BenchOutcome, target: Target, before: list[PgdynoObject] | None,
    log: Callable[[str], None],
) -> list[Leftover] | None:  # fmt: skip
    """What this bench created on the target, and the objects it reused from before."""
    after = None if before is None else objects_on(target, log)
    if before is None or after is None:
        return None
    return bench_leftovers(before, after, {BENCH_DB, *(d.template for d in outcome.datasets)})
