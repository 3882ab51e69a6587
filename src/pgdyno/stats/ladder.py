"""The cumulative tuning ladder: each step's gain over the previous one and over step 0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgdyno.stats.summary import CellStats, describe, require_positive
from pgdyno.stats.verdict import Comparison, compare

__all__ = ["Ladder", "LadderStep", "ladder"]


@dataclass(frozen=True, slots=True)
class LadderStep:
    name: str
    stats: CellStats
    step_gain: Comparison | None  # against the previous step; None for step 0
    cumulative: Comparison | None  # against step 0; None for step 0
    # This step relative to step 0, in % (step 0 is 100), from the ratio of geometric means:
    # the estimator of the gains, so a waterfall's bar and its interval agree.
    level_pct: float


@dataclass(frozen=True, slots=True)
class Ladder:
    steps: tuple[LadderStep, ...]
    total: Comparison | None  # last step against step 0; None with a single step


def ladder(
    steps: Sequence[tuple[str, Sequence[float]]], *, higher_is_better: bool = True
) -> Ladder:
    """The cumulative tuning ladder: each step applied on top of the previous one.

    Step 0 is the starting point. Each later step is compared with the step before (its own
    gain) and with step 0 (the gain so far); ``level_pct`` is 100 plus the gain so far, for a
    waterfall chart.

    >>> lad = ladder([("default", [100, 101, 99]), ("tuned", [120, 121, 119])])
    >>> [round(s.level_pct) for s in lad.steps], lad.total is not None and lad.total.verdict
    ([100, 120], 'better')
    """
    if not steps:
        raise ValueError("ladder: no steps")
    out: list[LadderStep] = []
    first_name, first = steps[0]
    require_positive(first, f"ladder step {first_name!r}")
    first_stats = describe(first)
    out.append(LadderStep(first_name, first_stats, None, None, 100.0))
    previous = first
    for name, values in steps[1:]:
        require_positive(values, f"ladder step {name!r}")
        so_far = compare(first, values, higher_is_better=higher_is_better)
        out.append(
            LadderStep(
                name,
                describe(values),
                compare(previous, values, higher_is_better=higher_is_better),
                so_far,
                100.0 + so_far.change_pct,
            )
        )
        previous = values
    total = out[-1].cumulative if len(out) > 1 else None
    return Ladder(tuple(out), total)
