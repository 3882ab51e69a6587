"""`pgdyno tune --verify`: the verification (pgdyno.lab.verify) rendered."""

from __future__ import annotations

from pathlib import Path

from pgdyno.cli.common import err, out, print_json
from pgdyno.cli.progress import MatrixProgress
from pgdyno.cli.tune_request import VerifyOptions
from pgdyno.environment import Environment
from pgdyno.formatting import burn_in_line
from pgdyno.lab import verify as lab
from pgdyno.results.encode import rounds_json
from pgdyno.terminal.verdict_tables import (
    carryover_lines,
    design_line,
    rounds_summary,
    switch_costs,
    verdict_table,
)
from pgdyno.textsafe import safe_text
from pgdyno.tune.model import Configuration


def verify_plans(
    env: Environment, options: VerifyOptions, ours: Configuration, pgtune: Configuration
) -> list[Path]:
    """The plan files of the verification, written under <workdir>/tune/."""
    return lab.verify_plans(env, options, ours, pgtune, err(env).print)


def run_verify(env: Environment, plans: list[Path], *, as_json: bool) -> None:
    def shown(one: lab.Verified) -> None:
        if as_json:
            return
        done, console = one.executed, out(env)
        console.print(verdict_table(done.analysis, f"tune --verify ({one.plan.name})"))
        history = done.outcome.rounds.history()
        console.print(rounds_summary(history))
        console.print(design_line(history))
        console.print(burn_in_line(done.plan.spec.matrix.warmup))
        for line in switch_costs(done.carryover):
            console.print(line)
        for line in carryover_lines(done.carryover, history.design):
            err(env).print(line)
        for line in one.lines:
            console.print(line)
        console.print(f"report: {safe_text(one.report)}")

    found = lab.verify(
        env, plans, log=err(env).print, progress=lambda: MatrixProgress(err(env)), shown=shown
    )
    if as_json:
        print_json(env, {"verify": [_as_json(one) for one in found]})


def _as_json(one: lab.Verified) -> dict[str, object]:
    done = one.executed
    return {"plan": str(one.plan), "comparison": done.outcome.comparison_id,
            "verdicts": one.lines, "report": str(one.report),
            "rounds": rounds_json(done.outcome.rounds.history()),
            "analysis": done.analysis.as_dict(),
            "carryover": [fit.as_dict() for fit in done.carryover]}  # fmt: skip
