"""From a comparison's stored runs to statistics and verdicts per cell and set (pure).

A cell is one (workload, scale, clients) of the plan's matrix; every set runs every cell once a
round. Each set is compared with the baseline on throughput (higher is better: TPS, or NOPM for
the TPC-C-like workload, whose `tps_change` and `tps` then hold NOPM and say so in `figure`) and
on p99 latency (lower is better), paired by round (`pgdyno.stats.paired`); a ladder also
compares each step with the one before it. Runs flagged for interference (other processes or
the hypervisor took CPU time during the run) are left out and counted as discarded, but for the
periods of adaptive rounds switched inside one run: those are kept, and each round's difference
is adjusted for the interference measured in its two periods (`pgdyno.stats.covariates`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from pgdyno.records.profile import FunctionMove
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.cpu_profile import moved
from pgdyno.stats.dependence import clearly_dependent
from pgdyno.stats.family import ErrorControl, family_size, p99_size
from pgdyno.stats.ladder import Ladder, ladder
from pgdyno.stats.levels import COMPARE_ALPHA, MIN_EFFECT_PCT
from pgdyno.stats.paired import Rounds, compare_adjusted, compare_rounds
from pgdyno.stats.sequential import MIXTURE_G, mixture_for_rounds
from pgdyno.stats.summary import CellStats, describe
from pgdyno.stats.verdict import SAME, ChangeVerdict, compare, practically_equal
from pgdyno.stats.waits import WaitChange, largest_changes

CellKey = tuple[str, int, int]  # workload, scale, clients
SWITCHED: Final = "switching"  # the design of sets switched inside one run (its rounds' design)


@dataclass(frozen=True)
class Judging:
    """How a comparison's runs are judged: paired by round (comparisons) or not (groups of bench
    runs), and with the always-valid interval when the rounds were adaptive."""

    paired: bool = True
    sequential: bool = False
    alpha: float = COMPARE_ALPHA  # this comparison's share of the plan-wide error
    # The rounds the budget holds, fixed before the data (experiment/rounds.py's RoundLog):
    # the t-mixture is tuned to them (None keeps MIXTURE_G), and the estimate at an adaptive
    # stop is adjusted for a design of that many rounds (None: the rounds so far).
    mixture_rounds: int | None = None
    # The sets took turns inside one run (the "switching" design): disturbed periods are kept
    # and, with adaptive rounds, adjusted for (pgdyno.stats.covariates).
    switched: bool = False

    @property
    def keeps_disturbed(self) -> bool:
        """Whether runs flagged for interference are judged (adjusted) rather than left out."""
        return self.paired and self.sequential and self.switched

    @property
    def g(self) -> float:
        """The t-mixture's variance: tuned to the budget's rounds at the mixture's share of the
        error (half of it: `pgdyno.stats.paired.sequential_interval`), else MIXTURE_G.

        >>> Judging().g, round(Judging(sequential=True, alpha=0.05 / 6, mixture_rounds=5).g)
        (2.0, 22)
        """
        if not self.sequential or self.mixture_rounds is None:
            return MIXTURE_G
        return mixture_for_rounds(self.mixture_rounds, self.alpha / 2.0)

    def __call__(
        self, base: Rounds, cand: Rounds, higher_is_better: bool = True,
        covariates: tuple[Rounds, Rounds] | None = None,
    ) -> ChangeVerdict:  # fmt: skip
        """`base` against `cand`, one figure (adjusted for `covariates` when they are kept)."""
        if self.paired and self.keeps_disturbed and covariates is not None:
            return compare_adjusted(
                base, cand, covariates, higher_is_better=higher_is_better, alpha=self.alpha,
                g=self.g, horizon=self.mixture_rounds,
            )  # fmt: skip
        if self.paired:
            return compare_rounds(
                base, cand, higher_is_better=higher_is_better, sequential=self.sequential,
                alpha=self.alpha, g=self.g, horizon=self.mixture_rounds,
            )  # fmt: skip
        return compare(
            list(base.values()), list(cand.values()), higher_is_better=higher_is_better,
            alpha=self.alpha,
        )  # fmt: skip


@dataclass(frozen=True)
class SetResult:
    cell: CellKey
    set_name: str
    runs: int  # successful runs behind the figures
    failed: int
    discarded: int  # runs left out for interference
    tps: CellStats | None
    p99_ms: CellStats | None
    tps_change: ChangeVerdict | None  # against the baseline (None for the baseline itself)
    p99_change: ChangeVerdict | None
    warnings: tuple[str, ...]
    figure: str = "tps"  # what `tps` and `tps_change` measure: "tps", or "nopm" for tpcc
    # Each run's worst transaction, described only: a maximum is one transaction, too erratic
    # to judge (seed 001 reads it beside TPS; the verdict stays on TPS and p99).
    max_ms: CellStats | None = None  # the runs' maxima: their median...
    worst_ms: float | None = None  # ...and the largest of them
    # The wait events whose share of database time moved most against the baseline: why the
    # figures differ, as far as sampling shows it (stats/waits.py); () without profiles.
    wait_changes: tuple[WaitChange, ...] = ()
    # The functions whose share of the server's CPU moved most against the baseline, beyond
    # sampling error (stats/cpu_profile.py); () without CPU profiles.
    cpu_changes: tuple[FunctionMove, ...] = ()

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
    error_control: ErrorControl  # the plan-wide rule every verdict above follows

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "mode": self.mode,
            "error_control": self.error_control.as_dict(),
            "results": [r.as_dict() for r in self.results],
            "ladders": [
                {"cell": {"workload": k[0], "scale": k[1], "clients": k[2]}, **asdict(lad)}
                for k, lad in self.ladders
            ],
        }


def _key(run: RunOutcome) -> CellKey:
    return (run.workload, run.scale, run.clients)


def _warnings(
    runs: Sequence[RunOutcome], change: ChangeVerdict | None, name: str = "the candidate",
    kept: bool = False,
) -> tuple[str, ...]:  # fmt: skip
    seen: dict[str, None] = {}
    for run in runs:
        for warning in run.warnings:
            if not run.interfered:  # a disturbed run's story is the line below
                seen.setdefault(warning.split(":")[0], None)
    discarded = sum(1 for r in runs if r.interfered)
    if discarded and kept:
        seen.setdefault(
            f"{discarded} period{'s' if discarded > 1 else ''} disturbed: other processes or the "
            "hypervisor took CPU time during them (interference); kept, and their rounds "
            "adjusted for it",
            None,
        )
    elif discarded:
        seen.setdefault(
            f"{discarded} run{'s' if discarded > 1 else ''} discarded: other processes or the "
            "hypervisor took CPU time during them (interference)",
            None,
        )
    for note in _change_notes(change, name) if change is not None else []:
        seen.setdefault(note, None)
    return tuple(seen)


def _change_notes(change: ChangeVerdict, name: str = "the candidate") -> list[str]:
    """What a reader of a comparison's verdict should know about its interval."""
    notes = _sequential_notes(change, name) if change.method == "sequential" else []
    if change.adjusted_rounds:
        narrowed = "" if change.narrowed_pct is None else (
            f": the interval {abs(change.narrowed_pct):.0f}% "
            f"{'narrower' if change.narrowed_pct >= 0 else 'wider'} than without it"
        )  # fmt: skip
        notes.append(
            f"adjusted for interference (foreign CPU and steal) in {change.adjusted_rounds} "
            f"round{'s' if change.adjusted_rounds > 1 else ''}, slope "
            f"{change.adjusted_slope or 0.0:+.2f} per machine{narrowed}"
        )
    if change.noisy:
        within = " within a round" if change.method != "unpaired" else ""
        notes.append(f"noisy: repeats vary by more than 5%{within}")
    if change.method == "unpaired" and change.pairs is not None:
        notes.append("fewer than 2 complete rounds: judged unpaired")
    elif change.left_out:
        noun = "run" if change.left_out == 1 else "runs"
        notes.append(f"{change.left_out} {noun} without a partner in their round left out")
    if change.method == "paired" and clearly_dependent(change.autocorrelation, change.pairs or 0):
        notes.append(
            f"rounds are dependent (lag-1 autocorrelation {change.autocorrelation:.2f}): the "
            "interval assumes independent rounds and may be too narrow"
        )
    if change.verdict == SAME and practically_equal(
        change.ci_low_pct, change.ci_high_pct, MIN_EFFECT_PCT
    ):
        notes.append(f"practically equal: the whole interval is within +-{MIN_EFFECT_PCT:g}%")
    elif change.verdict == SAME and change.repeats_needed and not change.erratic:
        unit = "rounds" if change.method != "unpaired" else "repeats per set"
        notes.append(f"about {change.repeats_needed} {unit} would resolve a change this size")
    return notes


def _sequential_notes(change: ChangeVerdict, name: str) -> list[str]:
    """The adaptive comparison's own notes: its second figure, broken assumptions, the stop.

    >>> ok = ChangeVerdict(0.4, -1.9, 2.8, "no detectable difference", False, None,
    ...                    "sequential", 57, 0, 0.1, robust_pct=0.3, robust_low_pct=-2.4,
    ...                    robust_high_pct=1.9)
    >>> _sequential_notes(ok, "b")  # doctest: +NORMALIZE_WHITESPACE
    ['robust centre +0.3% [-2.4, +1.9]', 'the two intervals together, which the verdict and the
    stop judge: [-1.9, +1.9]']
    >>> c = ChangeVerdict(-3.1, -9.0, 3.2, "no detectable difference", False, None,
    ...                   "sequential", 40, 0, 0.1, robust_pct=0.2, robust_low_pct=-1.0,
    ...                   robust_high_pct=1.5, erratic=True)
    >>> _sequential_notes(c, "b")  # doctest: +NORMALIZE_WHITESPACE
    ['robust centre +0.2% [-1.0, +1.5]', 'runs of b are erratic: the intervals of the mean change
    and of the robust centre, look after look, do not all meet (the rounds are not one
    steady distribution), so the assumptions behind a verdict are broken: no better or worse']
    """
    notes = []
    centre, r_low, r_high = change.robust_pct, change.robust_low_pct, change.robust_high_pct
    if centre is not None and r_low is not None and r_high is not None:
        notes.append(f"robust centre {centre:+.1f}% [{r_low:+.1f}, {r_high:+.1f}]")
    both = change.verdict_interval
    if not change.erratic and None not in both and both != (change.ci_low_pct, change.ci_high_pct):
        # What the verdict and a precision stop judged: narrower than the mean's printed one.
        notes.append(f"the two intervals together, which the verdict and the stop judge: "
                     f"[{both[0]:+.1f}, {both[1]:+.1f}]")  # fmt: skip
    if change.erratic:
        notes.append(
            f"runs of {name} are erratic: the intervals of the mean change and of the robust "
            "centre, look after look, do not all meet (the rounds are not one steady "
            "distribution), so the assumptions behind a verdict are broken: no better or worse"
        )
    if clearly_dependent(change.autocorrelation, change.pairs or 0):
        notes.append(
            f"rounds are dependent (lag-1 autocorrelation {change.autocorrelation:.2f}): the "
            "mean's interval is widened for it, the robust centre's left out of the verdict"
        )
    if change.stopped_early:
        low, high = change.ci_low_pct, change.ci_high_pct
        if low is None or high is None or low <= 0.0 <= high:
            notes.append("the verdict rests on the robust centre: outlying rounds spread the mean")
        naive = "" if change.naive_change_pct is None else (
            f" (the plain mean of the rounds: {change.naive_change_pct:+.1f}%)"
        )  # fmt: skip
        notes.append(
            "stopped early: the change shown is adjusted for the bias of stopping when it is far "
            f"from zero{naive}; the interval is valid"
        )
    return notes


def _usable(runs: Sequence[RunOutcome], keep_disturbed: bool = False) -> list[RunOutcome]:
    return [
        r for r in runs
        if r.status == "ok" and r.throughput and (keep_disturbed or not r.interfered)
    ]  # fmt: skip


def _load(run: RunOutcome) -> float:
    """The run's interference as a fraction of the machine: foreign CPU plus steal (0 for a
    clean run, whose interference stayed under the limit and was not kept)."""
    found = run.interference
    return 0.0 if found is None else (found.foreign_cpu_pct + found.steal_pct) / 100.0


def _load_by_round(runs: Sequence[RunOutcome]) -> dict[int, float]:
    """A set's interference per round (the mean of a round's runs)."""
    values: dict[int, list[float]] = {}
    for run in runs:
        values.setdefault(run.repeat, []).append(_load(run))
    return {r: sum(v) / len(v) for r, v in values.items()}


def _by_round(runs: Sequence[RunOutcome], figure: str) -> dict[int, float]:
    """A set's figure per round; two runs of one round (an older resume) give their geometric
    mean."""
    values: dict[int, list[float]] = {}
    for run in runs:
        value = getattr(run, figure)
        if value:
            values.setdefault(run.repeat, []).append(float(value))
    return {r: math.exp(sum(map(math.log, v)) / len(v)) for r, v in values.items()}


def _wait_changes(base: Sequence[RunOutcome], cand: Sequence[RunOutcome]) -> tuple[WaitChange, ...]:
    return largest_changes(
        [r.waits for r in base if r.waits is not None],
        [r.waits for r in cand if r.waits is not None],
    )


def _cpu_changes(
    base: Sequence[RunOutcome], cand: Sequence[RunOutcome]
) -> tuple[FunctionMove, ...]:
    return moved(
        [r.profile for r in base if r.profile is not None],
        [r.profile for r in cand if r.profile is not None],
    )


def analyse(
    runs: Sequence[RunOutcome],
    set_names: Sequence[str],
    baseline: str,
    mode: str,
    judging: Judging | None = None,
) -> Analysis:
    """Statistics for every (cell, set) with the runs of a comparison, in plan order.

    >>> from pgdyno.records.health import RunHealth
    >>> tps = [("a", 100), ("b", 120), ("a", 101), ("b", 121), ("a", 99), ("b", 119)]
    >>> runs = [RunOutcome(i, s, "ok", "w", 1, 2, 1 + i // 2, t, 1.0, None, RunHealth(), "18")
    ...         for i, (s, t) in enumerate(tps)]
    >>> result = analyse(runs, ["a", "b"], "a", "sets").results[1]
    >>> result.set_name, round(result.tps_change.change_pct), result.tps_change.verdict
    ('b', 20, 'better')
    """
    by_cell: dict[CellKey, dict[str, list[RunOutcome]]] = {}
    for run in runs:
        by_cell.setdefault(_key(run), {}).setdefault(str(run.set_name), []).append(run)
    # Every verdict takes its share of the plan-wide error (pgdyno.stats.family): TPS, which
    # drives the stopping, most of it; p99 a stated share.
    sets, cells = len(set_names), len(by_cell)
    control = ErrorControl(
        family_size(sets, cells, ladder=mode == "ladder"), p99=p99_size(sets, cells),
        figure="NOPM" if any(run.tpcc is not None for run in runs) else "TPS",
    )  # fmt: skip
    judge = replace(judging or Judging(), alpha=control.alpha)
    judges = (judge, replace(judge, alpha=control.p99_alpha))
    results: list[SetResult] = []
    ladders: list[tuple[CellKey, Ladder]] = []
    for cell in sorted(by_cell):
        per_set = by_cell[cell]
        results.extend(_cell_results(cell, per_set, set_names, baseline, judges))
        if mode == "ladder":
            steps = [
                (name, _by_round(_usable(per_set.get(name, [])), "throughput"))
                for name in set_names
            ]
            if all(values for _, values in steps):
                ladders.append((cell, ladder(steps, judge=judge.__call__)))
    return Analysis(baseline, mode, tuple(results), tuple(ladders), control)


def _cell_results(
    cell: CellKey,
    per_set: Mapping[str, list[RunOutcome]],
    set_names: Sequence[str],
    baseline: str,
    judges: tuple[Judging, Judging],
) -> list[SetResult]:
    judge, latency_judge = judges
    kept = judge.keeps_disturbed
    base = _usable(per_set.get(baseline, []), kept)
    base_tps, base_p99 = _by_round(base, "throughput"), _by_round(base, "latency_p99_ms")
    results = []
    for name in set_names:
        every = per_set.get(name, [])
        good = _usable(every, kept)
        tps, p99 = _by_round(good, "throughput"), _by_round(good, "latency_p99_ms")
        loads = (_load_by_round(base), _load_by_round(good)) if kept else None
        tps_change = p99_change = None
        if name != baseline and tps and base_tps:
            tps_change = judge(base_tps, tps, covariates=loads)
        if name != baseline and p99 and base_p99:
            p99_change = latency_judge(base_p99, p99, higher_is_better=False, covariates=loads)
        tps_values = [float(r.throughput or 0) for r in good]
        p99_values = [float(r.latency_p99_ms) for r in good if r.latency_p99_ms]
        max_values = [float(r.latency_max_ms) for r in good if r.latency_max_ms]
        results.append(
            SetResult(
                cell=cell,
                set_name=name,
                runs=len(good),
                failed=sum(1 for r in every if r.status != "ok" or not r.throughput),
                discarded=0
                if kept
                else sum(1 for r in every if r.status == "ok" and r.throughput and r.interfered),
                tps=describe(tps_values) if tps_values else None,
                p99_ms=describe(p99_values) if p99_values else None,
                tps_change=tps_change,
                p99_change=p99_change,
                warnings=_warnings(every, tps_change, name, kept),
                figure="nopm" if any(r.tpcc is not None for r in every) else "tps",
                max_ms=describe(max_values) if max_values else None,
                worst_ms=max(max_values, default=None),
                wait_changes=() if name == baseline else _wait_changes(base, good),
                cpu_changes=() if name == baseline else _cpu_changes(base, good),
            )
        )
    return results
