"""From a comparison's stored runs to statistics and verdicts per cell and set (pure).

A cell is one (workload, scale, clients) of the plan's matrix; every set runs every cell
`repeats` times. Each set is compared with the baseline on TPS (higher is better) and on p99
latency (lower is better); a ladder also compares each step with the one before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pgdyno.records.stored import RunOutcome
from pgdyno.stats.ladder import Ladder, ladder
from pgdyno.stats.summary import CellStats, describe
from pgdyno.stats.verdict import Comparison, compare

CellKey = tuple[str, int, int]  # workload, scale, clients


@dataclass(frozen=True)
class SetResult:
    cell: CellKey
    set_name: str
    runs: int  # successful runs behind the figures
    failed: int
    tps: CellStats | None
    p99_ms: CellStats | None
    tps_change: Comparison | None  # against the baseline (None for the baseline itself)
    p99_change: Comparison | None
    warnings: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cell"] = {"workload": self.cell[0], "scale": self.cell[1], "clients": self.cell[2]}
        return out


@dataclass(frozen=True)
class Analysis:
    baseline: str
    mode: str
    results: tuple[SetResult, ...]
    ladders: tuple[tuple[CellKey, Ladder], ...]  # per cell, for ladder plans

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "mode": self.mode,
            "results": [r.as_dict() for r in self.results],
            "ladders": [
                {"cell": {"workload": k[0], "scale": k[1], "clients": k[2]}, **asdict(lad)}
                for k, lad in self.ladders
            ],
        }


def _key(run: RunOutcome) -> CellKey:
    return (run.workload, run.scale, run.clients)


def _warnings(runs: Sequence[RunOutcome], change: Comparison | None) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for run in runs:
        for warning in run.warnings:
            seen.setdefault(warning.split(":")[0], None)
    if change is not None and change.noisy:
        seen.setdefault("noisy: repeats vary by more than 5%", None)
    if change is not None and change.verdict.startswith("no") and change.repeats_needed:
        seen.setdefault(f"about {change.repeats_needed} repeats per set would resolve it", None)
    return tuple(seen)


def analyse(
    runs: Sequence[RunOutcome], set_names: Sequence[str], baseline: str, mode: str
) -> Analysis:
    """Statistics for every (cell, set) with the runs of a comparison, in plan order.

    >>> runs = [RunOutcome(i, s, "ok", "w", 1, 2, 1, t, 1.0, None, {}, "18") for i, (s, t) in
    ...         enumerate([("a", 100), ("b", 120), ("a", 101), ("b", 121), ("a", 99), ("b", 119)])]
    >>> result = analyse(runs, ["a", "b"], "a", "sets").results[1]
    >>> result.set_name, round(result.tps_change.change_pct), result.tps_change.verdict
    ('b', 20, 'better')
    """
    by_cell: dict[CellKey, dict[str, list[RunOutcome]]] = {}
    for run in runs:
        by_cell.setdefault(_key(run), {}).setdefault(str(run.set_name), []).append(run)
    results: list[SetResult] = []
    ladders: list[tuple[CellKey, Ladder]] = []
    for cell in sorted(by_cell):
        per_set = by_cell[cell]

        def ok(name: str, per_set: dict[str, list[RunOutcome]] = per_set) -> list[RunOutcome]:
            return [r for r in per_set.get(name, []) if r.status == "ok" and r.tps]

        base_tps = [float(r.tps or 0) for r in ok(baseline)]
        base_p99 = [float(r.latency_p99_ms) for r in ok(baseline) if r.latency_p99_ms]
        for name in set_names:
            good = ok(name)
            tps = [float(r.tps or 0) for r in good]
            p99 = [float(r.latency_p99_ms) for r in good if r.latency_p99_ms]
            tps_change = p99_change = None
            if name != baseline and tps and base_tps:
                tps_change = compare(base_tps, tps)
            if name != baseline and p99 and base_p99:
                p99_change = compare(base_p99, p99, higher_is_better=False)
            results.append(
                SetResult(
                    cell=cell,
                    set_name=name,
                    runs=len(good),
                    failed=len(per_set.get(name, [])) - len(good),
                    tps=describe(tps) if tps else None,
                    p99_ms=describe(p99) if p99 else None,
                    tps_change=tps_change,
                    p99_change=p99_change,
                    warnings=_warnings(per_set.get(name, []), tps_change),
                )
            )
        if mode == "ladder":
            steps = [(name, [float(r.tps or 0) for r in ok(name)]) for name in set_names]
            if all(values for _, values in steps):
                ladders.append((cell, ladder(steps)))
    return Analysis(baseline, mode, tuple(results), tuple(ladders))
