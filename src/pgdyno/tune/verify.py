"""`pgdyno tune --verify`: the current configuration, pgtune's and pgdyno's, measured side by side.

The comparison is an ordinary plan file (written beside the results, so it can be read, kept and
run again with `pgdyno compare`): set "current" changes nothing, "pgtune" sets pgtune's
PostgreSQL values (those this server accepts), "pgdyno" sets pgdyno's values of every layer the
plan can express (PostgreSQL, sysctls, transparent huge pages, the data disk's queue). With
`ladder`, a second plan adds pgdyno's layers one at a time, then each setting whose evidence
conflicts ("measure"), so the step that helps or hurts is seen. The verdicts are the adaptive,
paired ones of `pgdyno compare`: what the measurement does not support is reported as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tomli_w

from pgdyno.stats.analysis import Analysis, SetResult
from pgdyno.stats.verdict import BETTER, WORSE, ChangeVerdict
from pgdyno.tune.model import LAYERS, Configuration, Setting

CURRENT, PGTUNE, PGDYNO = "current", "pgtune", "pgdyno"


@dataclass(frozen=True)
class Matrix:
    """What every configuration runs (the [matrix] of the plan)."""

    workloads: tuple[str, ...] = ("tpcb-like", "select-only")
    scale: str = "small"
    clients: int = 4
    duration: int = 60
    warmup: int = 10
    precision: float = 3.0
    budget: str = "30m"

    def table(self) -> dict[str, Any]:
        return {
            "workloads": list(self.workloads), "scales": [self.scale], "clients": [self.clients],
            "duration": self.duration, "warmup": self.warmup, "precision": self.precision,
            "budget": self.budget,
        }  # fmt: skip


def set_table(
    name: str, settings: Sequence[Setting], description: str, data_disk: str | None = None
) -> dict[str, Any]:
    """One plan set from settings of any layer; a plan's block settings are those of the disk
    under the data directory, so other disks' are left out."""
    table: dict[str, Any] = {"name": name, "description": description}
    pg = {s.name: s.value for s in settings if s.layer == "postgresql"}
    sysctl = {s.name: _number(s.value) for s in settings if s.layer == "host" and "." in s.name}
    thp = {
        s.name.partition("/")[2]: s.value
        for s in settings if s.name.startswith("transparent_hugepage/")
    }  # fmt: skip
    block = {
        s.name: _number(s.value)
        for s in settings if s.layer == "device" and s.device == data_disk
    }  # fmt: skip
    for key, values in (("pg", pg), ("sysctl", sysctl), ("thp", thp), ("block", block)):
        if values:
            table[key] = values
    return table


def data_disk(config: Configuration) -> str | None:
    return config.facts.data_disk()


def _number(text: str) -> int | str:
    return int(text) if text.lstrip("-").isdigit() else text


def sets_plan(
    ours: Configuration, pgtune: Configuration, matrix: Matrix, major: int
) -> dict[str, Any]:
    return {
        "name": "tune-verify",
        "description": f"pgdyno tune --verify (profile {ours.profile}): current vs pgtune vs "
        "pgdyno",
        "mode": "sets",
        "baseline": CURRENT,
        "pg_version": major,
        "matrix": matrix.table(),
        "set": [
            {"name": CURRENT, "description": "the configuration in effect now"},
            set_table(PGTUNE, pgtune.to_apply(("postgresql",)), "pgtune's formulas"),
            set_table(PGDYNO, ours.to_apply(), "pgdyno's configuration", data_disk(ours)),
        ],
    }


def ladder_plan(ours: Configuration, matrix: Matrix, major: int) -> dict[str, Any]:
    """current, then pgdyno's postgresql, host and device layers added one at a time, then each
    "measure" setting on top (set names: step1-postgresql, ...)."""
    steps: list[dict[str, Any]] = [{"name": CURRENT, "description": "the configuration now"}]
    for layer in LAYERS:
        chosen = ours.to_apply((layer,))
        if chosen:
            name = f"step{len(steps)}-{layer}"
            steps.append(set_table(name, chosen, f"pgdyno's {layer} settings", data_disk(ours)))
    for setting in ours.settings:
        if setting.status == "measure":
            leaf = setting.name.rsplit(".", 1)[-1].replace("/", "-")
            name = f"step{len(steps)}-{leaf}-{setting.value}"[:63]
            steps.append(set_table(name, [setting], f"measure first: {setting.why}"))
    return {
        "name": "tune-verify-ladder",
        "description": f"pgdyno tune --verify --ladder (profile {ours.profile})",
        "mode": "ladder",
        "baseline": CURRENT,
        "pg_version": major,
        "matrix": matrix.table(),
        "set": steps,
    }


def plan_text(plan: Mapping[str, Any], header: str) -> str:
    return f"# {header}\n" + tomli_w.dumps(dict(plan))


def verdict_lines(analysis: Analysis) -> list[str]:
    """One line per configuration and cell: "+x% [a, b] TPS, p99 -y%, vs current" (NOPM for
    the TPC-C-like workload)."""
    lines = []
    for result in analysis.results:
        if result.set_name == analysis.baseline:
            continue
        lines.append(_line(result, analysis.baseline))
    return lines


def _line(result: SetResult, baseline: str) -> str:
    workload, scale, clients = result.cell
    size = f"{scale} warehouses" if result.figure == "nopm" else f"scale {scale}"
    head = f"{result.set_name:<10} {workload} {size}, {clients} clients: "
    tps = result.tps_change
    if tps is None:
        return head + "no verdict (no usable runs)"
    text = f"{_pct(tps)} {result.figure.upper()}"
    if result.p99_change is not None:
        text += f", p99 {result.p99_change.change_pct:+.1f}%"
    return head + f"{text}, vs {baseline}: {_word(tps)}"


def _pct(c: ChangeVerdict) -> str:
    if c.ci_low_pct is None or c.ci_high_pct is None:
        # The always-valid interval is unbounded for the first rounds (5 at pgdyno's g).
        return f"{c.change_pct:+.1f}% [no interval yet: too few rounds]"
    return f"{c.change_pct:+.1f}% [{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}]"


def _word(c: ChangeVerdict) -> str:
    if c.verdict == BETTER:
        return "better"
    if c.verdict == WORSE:
        return "worse"
    return "no difference shown"
