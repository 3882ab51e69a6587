"""Plan-wide error control: one error rate for every verdict a plan prints (pure).

A plan with S sets, C cells and two figures (TPS, p99 latency) makes ``(S - 1) * C * 2``
comparisons with the baseline (a ladder also compares each step with the one before). At 97.5%
each, a plan of 20 comparisons would call a false "better" or "worse" somewhere about 40% of
the time. pgdyno controls the **plan-wide** rate instead: the probability that *any* verdict
of the plan is a false "better" or "worse", at *any* round it looked at, is at most
``PLAN_ALPHA`` (5%).

How: the error is split on purpose, then evenly within each figure (Bonferroni). TPS drives the
stopping rule (`pgdyno.stats.stopping`), so it gets most of the budget: ``1 - P99_SHARE`` of
``PLAN_ALPHA`` (4%) over the TPS comparisons (a ladder's steps included), ``P99_SHARE`` (1%) over
the p99 ones, whose spread is several times that of TPS and which only ride along. Each
always-valid interval misses its true change at some round with probability at most its share
(Ville's inequality), so by the union bound all cover at every round at once with probability at
least ``(1 - P99_SHARE) PLAN_ALPHA + P99_SHARE PLAN_ALPHA = PLAN_ALPHA``, however the comparisons
depend on each other (they share the baseline's runs). Every output says the split in one line
("error control: ..."). Why not e-BH (Wang and Ramdas 2022, "False discovery rate control with
e-values"), which the t-mixture's e-values would allow:

* e-BH controls the false discovery *rate* at the time the plan stops, not the probability of
  a false verdict at any of the looks before; the rounds look after every round and the
  report shows the verdicts of every look that stopped;
* in the case the issue asks about, where nothing changed, the two coincide: e-BH's first
  rejection needs an e-value of ``K / alpha``, exactly the Bonferroni threshold, and its gain
  only comes once several comparisons are already called;
* every verdict stays "the interval lies beyond the floor": the printed interval is the one
  the verdict rests on, and the stopping rule's precision is read on the same interval.

The cost is width: the intervals grow with ``log K``, not with K (20 comparisons: about
1.2-1.25 times the always-valid width at 97.5%, from 20 rounds on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["P99_SHARE", "PLAN_ALPHA", "ErrorControl", "family_size", "p99_size", "split"]

PLAN_ALPHA: Final = 0.05
P99_SHARE: Final = 0.2  # of PLAN_ALPHA, for the p99 comparisons; TPS gets the rest


@dataclass(frozen=True, slots=True)
class ErrorControl:
    """The plan-wide rule as the outputs state it: ``comparisons`` in all, ``p99`` of them on
    p99 latency (0: one even split, as before issue 33)."""

    comparisons: int
    plan_alpha: float = PLAN_ALPHA
    p99: int = 0
    p99_share: float = P99_SHARE
    figure: str = "TPS"  # what the stopping rule watches: "NOPM" for the TPC-C-like workload

    @property
    def tps(self) -> int:
        """The comparisons on TPS (NOPM), a ladder's steps included."""
        return max(1, self.comparisons - self.p99)

    @property
    def alpha(self) -> float:
        """Each TPS comparison's error: its interval is at ``1 - alpha``."""
        if not self.p99:
            return split(self.plan_alpha, self.comparisons)
        return split(self.plan_alpha * (1.0 - self.p99_share), self.tps)

    @property
    def p99_alpha(self) -> float:
        """Each p99 comparison's error."""
        if not self.p99:
            return self.alpha
        return split(self.plan_alpha * self.p99_share, self.p99)

    @property
    def text(self) -> str:
        """One line for the tables and the JSON.

        >>> ErrorControl(8).text
        'Bonferroni, 5% plan-wide over 8 comparisons (each interval at 99.375%)'
        >>> ErrorControl(6, p99=2).text  # doctest: +NORMALIZE_WHITESPACE
        'Bonferroni, 5% plan-wide: 4% over 4 TPS comparisons, which the stopping rule watches
        (each interval at 99%), 1% over 2 p99 comparisons (each at 99.5%)'
        """
        if not self.p99:
            return (
                f"Bonferroni, {100 * self.plan_alpha:g}% plan-wide over {self.comparisons} "
                f"comparison{'s' if self.comparisons != 1 else ''} "
                f"(each interval at {100 * (1 - self.alpha):.6g}%)"
            )
        tps_pct = 100 * self.plan_alpha * (1 - self.p99_share)
        return (
            f"Bonferroni, {100 * self.plan_alpha:g}% plan-wide: {tps_pct:.3g}% over {self.tps} "
            f"{self.figure} comparison{'s' if self.tps != 1 else ''}, which the stopping rule "
            "watches "
            f"(each interval at {100 * (1 - self.alpha):.6g}%), "
            f"{100 * self.plan_alpha * self.p99_share:.3g}% over {self.p99} p99 "
            f"comparison{'s' if self.p99 != 1 else ''} (each at {100 * (1 - self.p99_alpha):.6g}%)"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "method": "bonferroni",
            "plan_alpha": self.plan_alpha,
            "comparisons": self.comparisons,
            "alpha_each": self.alpha,
            "p99_comparisons": self.p99,
            "p99_share": self.p99_share if self.p99 else None,
            "p99_alpha_each": self.p99_alpha,
            "text": self.text,
        }


def family_size(sets: int, cells: int, *, ladder: bool = False) -> int:
    """Comparisons a plan makes: every set but the baseline against it, on TPS and p99, in
    every cell; a ladder adds each step against the one before (TPS).

    >>> family_size(2, 1), family_size(3, 4), family_size(3, 4, ladder=True)
    (2, 16, 24)
    """
    others = max(0, sets - 1) * max(1, cells)
    return max(1, others * (3 if ladder else 2))


def p99_size(sets: int, cells: int) -> int:
    """The p99 comparisons among `family_size`'s: every set but the baseline, every cell.

    >>> p99_size(2, 1), p99_size(3, 4)
    (1, 8)
    """
    return max(0, sets - 1) * max(1, cells)


def split(plan_alpha: float, comparisons: int) -> float:
    """Each comparison's share of the plan-wide error.

    >>> split(0.05, 2), split(0.05, 20)
    (0.025, 0.0025)
    """
    if not 0.0 < plan_alpha < 1.0:
        raise ValueError(f"need 0 < plan_alpha < 1, got {plan_alpha}")
    return plan_alpha / max(1, comparisons)
