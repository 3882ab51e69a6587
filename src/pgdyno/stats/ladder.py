"""The cumulative tuning ladder: each step's gain over the previous one and over step 0."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pgdyno.stats.paired import Rounds, compare_rounds
from pgdyno.stats.summary import CellStats, describe, require_positive
from pgdyno.stats.verdict import ChangeVerdict

Judge = Callable[[Rounds, Rounds, bool], ChangeVerdict]

__all__ = ["Ladder", "LadderStep", "ladder"]


@dataclass(frozen=True, slots=True)
class LadderStep:
    name: str
    stats: CellStats
    step_gain: ChangeVerdict | None  # against the previous step; None for step 0
    cumulative: ChangeVerdict | None  # against step 0; None for step 0
    # This step relative to step 0, in % (step 0 is 100), from the ratio of geometric means:
    # the estimator of the gains, so a waterfall's bar and its interval agree.
    level_pct: float


@dataclass(frozen=True, slots=True)
class Ladder:
    steps: tuple[LadderStep, ...]
    total: ChangeVerdict | None  # last step against step 0; None with a single step


def _paired(base: Rounds, cand: Rounds, higher_is_better: bool) -> ChangeVerdict:
    return compare_rounds(base, cand, higher_is_better=higher_is_better)


def _rounds(values: Sequence[float] | Mapping[int, float]) -> dict[int, float]:
    if isinstance(values, Mapping):
        return dict(values)
    return {i + 1: float(v) for i, v in enumerate(values)}


def ladder(
    steps: Sequence[tuple[str, Sequence[float] | Mapping[int, float]]],
    *,
    higher_is_better: bool = True,
    judge: Judge = _paired,
) -> Ladder:
    """The cumulative tuning ladder: each step applied on top of the previous one.

    Step 0 is the starting point. Each later step is compared with the step before (its own
    gain) and with step 0 (the gain so far); ``level_pct`` is 100 plus the gain so far, for a
    waterfall chart. A step's figures are given per round (a mapping) or in round order (a
    sequence: the i-th value is round i+1); `judge` compares two steps (paired by round unless
    told otherwise).

    >>> lad = ladder([("default", [100, 101, 99]), ("tuned", [120, 121, 119])])
    >>> [round(s.level_pct) for s in lad.steps], lad.total is not None and lad.total.verdict
    ([100, 120], 'better')
    """
    if not steps:
        raise ValueError("ladder: no steps")
    out: list[LadderStep] = []
    first_name, first_values = steps[0]
    first = _rounds(first_values)
    require_positive(list(first.values()), f"ladder step {first_name!r}")
    out.append(LadderStep(first_name, describe(list(first.values())), None, None, 100.0))
    previous = first
    for name, step_values in steps[1:]:
        values = _rounds(step_values)
        require_positive(list(values.values()), f"ladder step {name!r}")
        so_far = judge(first, values, higher_is_better)
        out.append(
            LadderStep(
                name,
                describe(list(values.values())),
                judge(previous, values, higher_is_better),
                so_far,
                100.0 + so_far.change_pct,
            )
        )
        previous = values
    total = out[-1].cumulative if len(out) > 1 else None
    return Ladder(tuple(out), total)
