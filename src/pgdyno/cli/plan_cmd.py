"""`pgdyno plan check`: a plan previewed for this machine (`lab.plan_preview`), shown."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from pgdyno.cli.common import PLAN, allow_options, environment, out, workdir_options
from pgdyno.formatting import burn_in_line
from pgdyno.lab.plan_preview import Duration, PlanPreview, PreviewedSet, preview_plan
from pgdyno.plan.policy import Allowed


@click.group()
def plan() -> None:
    """Plan files: configuration sets to compare (see examples/).

    \b
    Example:
      pgdyno plan check examples/aa.toml
    """


@plan.command("check")
@PLAN
@allow_options
@workdir_options
@click.pass_context
def plan_check(
    ctx: click.Context, /, plan_file: Path, allow_sysctl: tuple[str, ...],
    allow_pg: tuple[str, ...], **_: object,
) -> None:  # fmt: skip
    """Validate a plan against this machine and the PostgreSQL versions it names.

    Checks the file's form, every PostgreSQL setting against the target version's settings
    (type, unit, range, allowed values: from `postgres --describe-config` and pgdyno's
    recorded pg_settings of each version), every sysctl and block-device setting against what
    a plan may change and the running kernel, and each transparent huge pages word ([set.thp]
    enabled, defrag) against the words the kernel offers. Changes nothing: it creates no file,
    starts no
    server and installs no PostgreSQL version (one that is missing is checked against the
    recording and installed when the plan runs).

    \b
    Example:
      pgdyno plan check examples/001-dirty-pages.toml
    """
    env = environment(ctx)
    _show(out(env), preview_plan(env, plan_file, Allowed.of(allow_sysctl, allow_pg)))


def _show(console: Console, preview: PlanPreview) -> None:
    console.print(_table(preview))
    for s in preview.sets:
        for note in s.notes:
            console.print(f"set {s.name}: {note}")
    for line in preview.datasets:
        console.print(line)
    console.print(_duration(preview.duration, preview.design))
    if preview.design:
        console.print(preview.design)
    if preview.orders:
        console.print(preview.orders)
    console.print(
        burn_in_line(preview.burn_in_s, switching=True)
        if preview.switching
        else burn_in_line(preview.warmup_s)
    )
    if preview.capacity:
        console.print(preview.capacity)
    if preview.slow_settings:
        console.print(preview.slow_settings)
    if preview.seed is not None:
        console.print(
            f"seed: {preview.seed} (the plan's [matrix] seed): every compare of this plan, on "
            "every host, draws the same orders; `compare --seed N` overrides it."
        )
    for missing in preview.missing:
        console.print(
            f"PostgreSQL {missing.version} is not installed here: checked against pgdyno's "
            f"recorded settings of {missing.version}; it is {missing.source}."
        )


def _table(preview: PlanPreview) -> Table:
    table = Table(title=f"plan {preview.name}: valid", title_justify="left")
    storage = preview.has_storage
    for name in ("set", "PostgreSQL", "settings", "host settings", *(["storage"] * storage)):
        table.add_column(name)
    for s in preview.sets:
        table.add_row(*_row(s, storage))
    return table


def _row(s: PreviewedSet, storage: bool) -> list[str]:
    return [
        s.name + (" (baseline)" if s.baseline else ""),
        s.version,
        ", ".join(f"{k}={v}" for k, v in s.pg) or "-",
        ", ".join(f"{k}={v}" for k, v in s.host) or "-",
        *([s.storage] if storage else []),
    ]


def _duration(d: Duration, design: str = "") -> str:
    runs = "periods" if design.startswith("design: switching") else "runs"
    if d.adaptive is None:
        return f"{d.runs} {runs}, about {d.minutes:.0f} minutes (mode: {d.mode})"
    a = d.adaptive
    return (
        f"adaptive rounds of {d.runs} {runs} (about {d.minutes:.1f} min each) until"
        f" every {a.figure} comparison is resolved to +-{a.precision_pct:g}%"
        f" or {a.budget_minutes:.0f} minutes are spent (mode: {d.mode})"
    )
