"""`pgdyno tune --verify`: write the verification plans, run them as `compare` does, say what
the measurement supports (see pgdyno.tune.verify)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pgdyno import __version__
from pgdyno.cli.common import err, out, print_json
from pgdyno.cli.progress import MatrixProgress
from pgdyno.cli.tune_request import VerifyOptions
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.compare import CompareRequest, execute_compare
from pgdyno.plan.load import load_plan
from pgdyno.plan.policy import Allowed
from pgdyno.render.verdict_tables import rounds_summary, verdict_table
from pgdyno.report.export import make
from pgdyno.report.load import Selection
from pgdyno.store.encode import rounds_json
from pgdyno.store.open import open_results
from pgdyno.textsafe import safe_text
from pgdyno.tune.model import Configuration
from pgdyno.tune.verify import Matrix, ladder_plan, plan_text, sets_plan, verdict_lines
from pgdyno.undo.server import pending_changes


def verify_plans(
    env: Environment, options: VerifyOptions, ours: Configuration, pgtune: Configuration
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
        err(env).print(f"plan: {path} (run it again with `pgdyno compare {path}`)")
        paths.append(path)
    return paths


def run_verify(env: Environment, plans: list[Path], *, as_json: bool) -> None:
    results: list[dict[str, object]] = []
    for path in plans:
        request = CompareRequest(load_plan(path), Allowed.of((), ()))
        done = execute_compare(
            env, request, log=err(env).print, progress=lambda: MatrixProgress(err(env))
        )
        with open_results(env.results) as store:
            selection = Selection(comparison_id=done.outcome.comparison_id)
            _built, report = make(store, selection, datetime.now(UTC), None,
                                  env.data_dir / "reports")  # fmt: skip
        lines = verdict_lines(done.analysis)
        results.append({"plan": str(path), "comparison": done.outcome.comparison_id,
                        "verdicts": lines, "report": str(report),
                        "rounds": rounds_json(done.outcome.rounds.history()),
                        "analysis": done.analysis.as_dict()})  # fmt: skip
        if not as_json:
            console = out(env)
            console.print(verdict_table(done.analysis, f"tune --verify ({path.name})"))
            console.print(rounds_summary(done.outcome.rounds.history()))
            for line in lines:
                console.print(line)
            console.print(f"report: {safe_text(report)}")
    if as_json:
        print_json(env, {"verify": results})
