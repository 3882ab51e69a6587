"""`tune --verify`: write the verification plans of a configuration, run them as `compare`
does, and say what the measurement supports (the words: pgdyno.tune.verify)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pgdyno import __version__
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.lab.compare import CompareRequest, Executed, execute_compare
from pgdyno.lab.open import Progress
from pgdyno.plan.load import load_plan
from pgdyno.plan.policy import Allowed
from pgdyno.report.export import make
from pgdyno.report.load import Selection
from pgdyno.results.open import open_results
from pgdyno.tune.model import Configuration
from pgdyno.tune.verify import Matrix, ladder_plan, plan_text, sets_plan, verdict_lines
from pgdyno.undo.server import pending_changes


class VerifyMatrix(Protocol):
    """`--verify`'s measurement as the command parsed it (cli/tune_request.py VerifyOptions)."""

    @property
    def workloads(self) -> tuple[str, ...]: ...
    @property
    def scale(self) -> str: ...
    @property
    def clients(self) -> int | None: ...
    @property
    def duration(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def precision(self) -> float | None: ...
    @property
    def budget(self) -> str | None: ...
    @property
    def ladder(self) -> bool: ...


@dataclass(frozen=True)
class Verified:
    """One verification plan run: the comparison, its report and the lines it supports."""

    plan: Path
    executed: Executed
    report: Path
    lines: list[str]


def verify_plans(
    env: Environment,
    options: VerifyMatrix,
    ours: Configuration,
    pgtune: Configuration,
    log: Callable[[str], None],
) -> list[Path]:
    """The plan files of the verification, written under <workdir>/tune/."""
    if pending_changes(env.data_dir):
        raise UsageError(
            "settings from `pgdyno tune --apply` are still in effect, so every configuration "
            "would run with them: run `pgdyno rollback` first."
        )
    cpus, major = ours.facts.cpus, ours.facts.pg
    if major is None:
        raise UsageError(
            "--verify needs the sandbox's PostgreSQL version, which was not read: run "
            "`pgdyno doctor --sandbox` to see why."
        )
    matrix = Matrix(
        workloads=options.workloads,
        scale=options.scale,
        clients=options.clients or 2 * (cpus if cpus is not None else 2),
        duration=options.duration,
        warmup=options.warmup,
        precision=options.precision if options.precision is not None else 3.0,
        budget=options.budget if options.budget is not None else "30m",
    )
    folder = env.data_dir / "tune"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    plans = [("verify", sets_plan(ours, pgtune, matrix, major))]
    if options.ladder:
        plans.append(("ladder", ladder_plan(ours, matrix, major)))
    paths = []
    for kind, plan in plans:
        path = folder / f"{kind}-{stamp}.toml"
        path.write_text(plan_text(plan, f"written by pgdyno tune --verify {__version__}"))
        log(f"plan: {path} (run it again with `pgdyno compare {path}`)")
        paths.append(path)
    return paths


def verify(
    env: Environment,
    plans: list[Path],
    *,
    log: Callable[[str], None],
    progress: Progress,
    shown: Callable[[Verified], None],
) -> list[Verified]:
    """Run each plan as `compare` does and build its report; `shown` is called with each as it
    finishes (the command prints it before the next plan runs)."""
    found: list[Verified] = []
    for path in plans:
        request = CompareRequest(load_plan(path), Allowed.of((), ()))
        done = execute_compare(env, request, log=log, progress=progress)
        with open_results(env.results) as store:
            selection = Selection(comparison_id=done.outcome.comparison_id)
            _built, report = make(store, selection, datetime.now(UTC), None,
                                  env.data_dir / "reports")  # fmt: skip
        found.append(Verified(path, done, report, verdict_lines(done.analysis)))
        shown(found[-1])
    return found
