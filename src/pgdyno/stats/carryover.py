"""Carry-over: the effect on a run's throughput of the set that ran right before it.

A set can leave something behind for the run after it (a checkpoint it triggered, a cache it
cooled, a switch that restarts the server). `compare`'s balanced orders
(`pgdyno.experiment.schedule.Balanced`) let every set run right after every set equally often,
so such an effect falls on all sets alike; this module measures it, so a comparison can say
when it is there and how large. The model is the crossover trials' one (Jones & Kenward,
"Design and Analysis of Cross-Over Trials", ch. 1-2): log TPS of a run = the effect of its
cell and pair of rounds (rounds 1-2, 3-4, ...: drift) + the effect of its set + the effect of
the set that ran right before it, fitted by least squares (numpy.linalg.lstsq); each
carry-over is relative to runs that followed the reference set (the baseline), with its
standard error and p-value from the residuals' t distribution. A second fit puts a switch cost
per set in place of the set before (its runs right after another set against its runs right
after itself): a cost that only the switch to a set brings, which no order of rounds cancels.
Pure: runs in, a record out.

The blocks are pairs of rounds, not rounds: with two sets in chained orders (A B | B A | A B)
both runs of a round follow the same set, so an effect that depends only on the set before
is the same for both (it cancels in the paired difference, and a round block would absorb it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from pgdyno.records.stored import RunOutcome
from pgdyno.stats.student_t import t_cdf

_Matrix = npt.NDArray[np.float64]

AFTER: Final = "after"  # the effect of the set that ran right before
SWITCH: Final = "switch"  # a set's switch cost: another set ran right before it

# A carry-over worth a warning: at least this large a change of the next run's TPS ...
LARGE_CHANGE: Final = 0.01
# ... and this unlikely under no carry-over (two-sided).
SIGNIFICANT_P: Final = 0.01


@dataclass(frozen=True)
class CarryOver:
    """AFTER: runs right after set `after`, compared with runs right after the reference set;
    SWITCH: runs of set `after` right after another set, compared with its runs right after
    itself."""

    after: str
    change: float  # relative change of the next run's TPS: exp(effect) - 1
    se: float  # standard error of the effect on log TPS (about the relative change's)
    p_value: float
    runs: int  # runs that ran right after `after` and entered the fit

    @property
    def flagged(self) -> bool:
        """Large (at least LARGE_CHANGE) and significant (p below SIGNIFICANT_P)."""
        return abs(self.change) >= LARGE_CHANGE and self.p_value < SIGNIFICANT_P


@dataclass(frozen=True)
class CarryOverFit:
    """Every set's carry-over relative to runs right after `reference`."""

    reference: str
    effects: tuple[CarryOver, ...]
    residual_dof: int
    kind: str = AFTER

    @property
    def flagged(self) -> tuple[CarryOver, ...]:
        return tuple(e for e in self.effects if e.flagged)

    def as_dict(self) -> dict[str, object]:
        """For `compare --json` (strict JSON: no NaN)."""
        return {
            "kind": self.kind,
            "reference": self.reference,
            "residual_dof": self.residual_dof,
            "effects": [
                {"after": e.after, "change": e.change, "se": e.se, "p_value": e.p_value,
                 "runs": e.runs, "flagged": e.flagged}
                for e in self.effects
            ],
        }  # fmt: skip


def _usable(run: RunOutcome) -> bool:
    return run.status == "ok" and run.tps is not None and run.tps > 0


def preceded(runs: Sequence[RunOutcome]) -> list[tuple[RunOutcome, str]]:
    """Each usable run with the set of the run right before it (in run order: the ids), the
    first run of the comparison left out (nothing ran before it).

    >>> from pgdyno.records.health import RunHealth
    >>> def run(i, s):
    ...     return RunOutcome(i, s, "ok", "w", 1, 1, 1, 100.0, None, None, RunHealth(), "18")
    >>> [(r.id, before) for r, before in preceded([run(2, "b"), run(1, "a"), run(3, "b")])]
    [(2, 'a'), (3, 'b')]
    """
    ordered = sorted((r for r in runs if r.set_name is not None), key=lambda r: r.id)
    return [
        (run, str(before.set_name)) for before, run in itertools.pairwise(ordered) if _usable(run)
    ]


def _block(run: RunOutcome) -> tuple[str, int, int, int]:
    """The run's cell and pair of rounds (rounds 1-2 are pair 0)."""
    return (run.workload, run.scale, run.clients, (run.repeat - 1) // 2)


def estimates(
    runs: Sequence[RunOutcome], sets: Sequence[str], reference: str
) -> tuple[CarryOverFit, ...]:
    """Both fits (the set before, the switch cost), those that can be made."""
    found = (estimate(runs, sets, reference, kind) for kind in (AFTER, SWITCH))
    return tuple(fit for fit in found if fit is not None)


def estimate(
    runs: Sequence[RunOutcome], sets: Sequence[str], reference: str, kind: str = AFTER
) -> CarryOverFit | None:
    """With `kind` AFTER, the carry-over of every set but `reference` (the effect on a run of
    having that set right before it, against having `reference` before it); with SWITCH, every
    set's switch cost (the effect on its run of having another set right before it, against
    itself). Fitted on `runs`; None: too few runs, or a design in which the effects cannot be
    told from the sets' own effects.

    >>> from pgdyno.records.health import RunHealth
    >>> def run(i, s, r, tps):
    ...     return RunOutcome(i, s, "ok", "w", 1, 1, r, tps, None, None, RunHealth(), "18")
    >>> order = [("a", "b"), ("b", "a")] * 4
    >>> sequence = [(s, r + 1) for r, rnd in enumerate(order) for s in rnd]
    >>> noise = [0.3, -0.2, 0.1, 0.0, -0.4, 0.2, 0.1, -0.1, 0.3, 0.0, -0.2, 0.1, 0.2, -0.3,
    ...          0.0, 0.1]
    >>> runs = [run(i, s, r, 1000.0 * (1 + noise[i] / 100) * (0.96 if i and sequence[i - 1][0]
    ...         == "b" else 1.0)) for i, (s, r) in enumerate(sequence)]
    >>> (e,) = estimate(runs, ["a", "b"], "a").effects
    >>> e.after, round(e.change, 3), e.flagged
    ('b', -0.04, True)
    """
    found = preceded(runs)
    others = [s for s in sets if s != reference]
    if not found or not others:
        return None
    blocks = sorted({_block(r) for r, _ in found})
    names = others if kind == AFTER else list(sets)
    hits = [_effect(kind, str(r.set_name), before, names) for r, before in found]
    column = {b: i for i, b in enumerate(blocks)}
    start = len(blocks) + len(others)
    x = np.zeros((len(found), start + len(names)))
    y = np.empty(len(found))
    for i, (r, _) in enumerate(found):
        x[i, column[_block(r)]] = 1.0
        if r.set_name in others:
            x[i, len(blocks) + others.index(str(r.set_name))] = 1.0
        if hits[i] is not None:
            x[i, start + names.index(str(hits[i]))] = 1.0
        y[i] = math.log(float(r.tps or 0.0))
    return _fitted(x, y, (names, start), reference, kind, hits)


def _effect(kind: str, name: str, before: str, names: list[str]) -> str | None:
    """The effect a run carries: the set before it (AFTER), or its own set when another ran
    before it (SWITCH); None for the reference."""
    if kind == AFTER:
        return before if before in names else None
    return name if before != name and name in names else None


def _fitted(
    x: _Matrix, y: _Matrix, columns: tuple[list[str], int], reference: str, kind: str,
    hits: list[str | None],
) -> CarryOverFit | None:  # fmt: skip
    names, start = columns
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    dof = len(y) - int(rank)
    if int(rank) < x.shape[1] or dof < 2:
        return None
    sigma2 = float(np.sum((y - x @ coef) ** 2)) / dof
    cov = sigma2 * np.linalg.inv(x.T @ x)
    effects = []
    for j, name in enumerate(names):
        k = start + j
        se = math.sqrt(max(float(cov[k, k]), 0.0))
        t_value = float(coef[k]) / se if se > 0 else 0.0
        p_value = 2 * t_cdf(-abs(t_value), dof) if se > 0 else 1.0  # the t's two tails
        effects.append(CarryOver(name, math.expm1(float(coef[k])), se, p_value, hits.count(name)))
    return CarryOverFit(reference, tuple(effects), dof, kind)
