"""Numbers and changes as text, written the same way in every output: the terminal tables
(terminal/), the HTML report and its exports (report/), and the sentences both print (how a
comparison's rounds were ordered, its switch costs, its carry-over warnings). Pure; it sits
below both so that neither renderer imports the other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pgdyno.stats.carryover import CarryOverFit
    from pgdyno.stats.verdict import ChangeVerdict


def fmt(value: float | None, digits: int = 1) -> str:
    """
    >>> fmt(1234.567), fmt(None), fmt(0.01234, 3)
    ('1,234.6', '-', '0.012')
    """
    return "-" if value is None else f"{value:,.{digits}f}"


def change_text(change: ChangeVerdict | None) -> str:
    """A change against the baseline with its interval, in percent.

    >>> from pgdyno.stats.verdict import ChangeVerdict
    >>> change_text(ChangeVerdict(4.2, 1.05, 7.49, "better", False, None))
    '+4.2% [+1.1, +7.5]'
    >>> change_text(None)
    '-'
    """
    if change is None:
        return "-"
    if change.ci_low_pct is None or change.ci_high_pct is None:
        return f"{change.change_pct:+.1f}%"
    return f"{change.change_pct:+.1f}% [{change.ci_low_pct:+.1f}, {change.ci_high_pct:+.1f}]"


# The stored designs whose orders are carry-over balanced (experiment/schedule.py `Balanced`:
# one run per set and round on one server, or on twin servers).
BALANCED = ("balanced", "twins")


def orders_line(design: str, seed: int | None) -> str:
    """How a comparison's rounds were ordered (its stored design and seed), and how to replay
    the orders: the same sentence in `compare`'s output, `runs list --comparison` and the
    report.

    >>> orders_line("balanced", 42)
    'Orders: balanced design (every set ran right after every set equally often in each complete block), seed 42 (`--seed 42` replays them).'
    >>> orders_line("rotation", None)
    'Orders: rotation (A B C, B C A, ...).'
    >>> orders_line("twins", 42)[:71]
    'Orders: balanced design on twin servers (one per set, each started once'
    """  # noqa: E501
    if design in BALANCED and seed is not None:
        where = " on twin servers (one per set, each started once)" if design == "twins" else ""
        return (
            f"Orders: balanced design{where} (every set ran right after every set equally often "
            f"in each complete block), seed {seed} (`--seed {seed}` replays them)."
        )
    if design == "rotation":
        return "Orders: rotation (A B C, B C A, ...)."
    if design == "switching" and seed is not None:
        return (
            "Orders: switching inside one pgbench run (a round is a period of each set, its "
            f"order drawn at random), seed {seed} (`--seed {seed}` replays them)."
        )
    return f"Orders: {design}" + (f", seed {seed}." if seed is not None else ".")


def _size(change: float, se: float) -> str:
    return f"{abs(change):.1%} {'slower' if change < 0 else 'faster'} (se {se:.1%})"


def switch_cost_line(fits: Sequence[CarryOverFit]) -> str | None:
    """Every set's estimated switch cost (its runs right after another set against its runs
    right after itself, `pgdyno.stats.carryover`), or None when the design let none be
    estimated (no run of a set right after itself, or too few runs).

    >>> from pgdyno.stats.carryover import CarryOver, CarryOverFit
    >>> cost = CarryOverFit("a", (CarryOver("a", 0.003, 0.006, 0.6, 6),
    ...                           CarryOver("b", -0.04, 0.008, 1e-5, 6)), 20, "switch")
    >>> switch_cost_line([cost])
    'Switch cost per set (its runs right after another set against its runs right after itself): a +0.3% (se 0.6%), b -4.0% (se 0.8%).'
    >>> switch_cost_line([CarryOverFit("a", (), 20)]) is None
    True
    """  # noqa: E501
    for fit in fits:
        if fit.kind == "switch" and fit.effects:
            costs = ", ".join(f"{e.after} {e.change:+.1%} (se {e.se:.1%})" for e in fit.effects)
            return (
                "Switch cost per set (its runs right after another set against its runs right "
                f"after itself): {costs}."
            )
    return None


def carryover_warnings(fits: Sequence[CarryOverFit], design: str) -> list[str]:
    """One warning per set whose carry-over (the effect on the run right after it) or switch
    cost (the effect on its own run right after another set) is large and significant
    (`CarryOver.flagged`); nothing when none is.

    >>> from pgdyno.stats.carryover import CarryOver, CarryOverFit
    >>> fit = CarryOverFit("a", (CarryOver("c", -0.041, 0.006, 1e-6, 12),
    ...                          CarryOver("b", 0.002, 0.006, 0.7, 12)), 20)
    >>> cost = CarryOverFit("a", (CarryOver("b", -0.04, 0.008, 1e-5, 12),), 20, "switch")
    >>> print(chr(10).join(carryover_warnings([fit, cost], "balanced")))
    Warning: runs right after set c were 4.1% slower (se 0.6%) than runs right after a; the balanced orders spread this over every set alike, but it adds noise.
    Warning: runs of set b right after another set were 4.0% slower (se 0.8%) than its runs right after itself: a switch cost no order of rounds cancels; its verdicts include it.
    """  # noqa: E501
    return [
        _carryover_warning(fit, e.after, _size(e.change, e.se), design)
        for fit in fits
        for e in fit.flagged
    ]


def _carryover_warning(fit: CarryOverFit, name: str, size: str, design: str) -> str:
    if fit.kind == "switch":
        return (
            f"Warning: runs of set {name} right after another set were {size} than its runs "
            "right after itself: a switch cost no order of rounds cancels; its verdicts "
            "include it."
        )
    spread = (
        "the balanced orders spread this over every set alike, but it adds noise"
        if design in BALANCED
        else f"the {design} orders do not balance it, so it can bias the verdicts"
    )
    return (
        f"Warning: runs right after set {name} were {size} than runs right after "
        f"{fit.reference}; {spread}."
    )


def burn_in_line(warmup_s: float | None, *, switching: bool = False) -> str:
    """What drops the first seconds after each set switch (a reload, a restart, a host
    change): the unmeasured warm-up every run starts with once its set is in effect
    (`[matrix] warmup`, `bench --warmup`), said by `plan check`, `compare` and the report.
    None: the runs differ (runs of several comparisons or sessions). When the sets take turns
    inside one run (`switching`), the seconds dropped after each switch ([matrix] burn_in).

    >>> burn_in_line(2, switching=True)
    'Burn-in: at least the first 2 s after each switch inside the run are dropped from its period, to the next whole second ([matrix] burn_in).'
    >>> burn_in_line(5)
    'Burn-in: every run started with 5 s of unmeasured load after its set was put in effect ([matrix] warmup), so the first seconds after each set switch are not in its figures.'
    >>> print(burn_in_line(0))
    Burn-in: none ([matrix] warmup = 0): the first seconds after each set switch (a cold cache after a restart, a checkpoint it triggered) are in the runs' figures; a warmup of 5 s or more drops them.
    """  # noqa: E501
    if switching:  # the sets take turns inside one run: each period starts with its burn-in
        return (
            f"Burn-in: at least the first {warmup_s:g} s after each switch inside the run are "
            "dropped from its period, to the next whole second ([matrix] burn_in)."
        )
    if warmup_s is None:
        return "Burn-in: the runs had different warm-ups (see each run's warmup_s)."
    if warmup_s > 0:
        return (
            f"Burn-in: every run started with {warmup_s} s of unmeasured load after its set "
            "was put in effect ([matrix] warmup), so the first seconds after each set switch "
            "are not in its figures."
        )
    return (
        "Burn-in: none ([matrix] warmup = 0): the first seconds after each set switch (a cold "
        "cache after a restart, a checkpoint it triggered) are in the runs' figures; a warmup "
        "of 5 s or more drops them."
    )
