"""Switching inside one run, through the real round loop: the burn-in keeps an A/A comparison
valid when a switch costs one set a short dip (issue 33, section 2).

Each simulated comparison runs the real `RoundLoop` with the switching design's real orders
(`pgdyno.experiment.switching.PairOrders`: each round's order a fair coin from the seed) and,
after every round (a pair of periods), the real look `judge_round` (the analysis with its
always-valid intervals at the plan-wide error's share, and `decide`), as `compare` does when
it switches inside one run; each period's timing and window are the engine's own
(`period_end`: the period ends on a whole second about `period` after its switch began, and
never before a whole second after its burn-in; `measured_window`: the whole seconds from
`burn_in` after the switch took effect to the period's end). The look after a round takes
0-0.3 s and a reload 0.02-0.2 s. Only pgbench's per-second throughput is simulated
(`Switching.period`): log TPS per second with 1.5% white noise and a slow random walk (0.1% a
second), and a set-specific switch cost: every switch *into* set b costs b 30%, fading with a
time constant `dip_s`.

- A/A with the default 3 s periods and 0.5 s burn-in, the dip fading in 0.1 s: 200 plans
  bound the plan-wide false-verdict rate below 5% (Clopper-Pearson, one-sided 95%). Such a dip
  is a stress: it would take the first 100 ms after a reload 19% down, where the reload's
  measured cost on this host was 0.992 +- 0.023 of the second before (benchmarks/reload_dip.py,
  docs/benchmarks.md).
- A dip five times slower (0.5 s) needs a longer burn-in, which `[matrix] burn_in` gives:
  with 5 s periods and a 1.5 s burn-in the A/A holds (60 plans).
- The same plans with no burn-in and the slow dip: the dip stays in b's periods and the plan
  calls b worse than itself in most plans (at a precision of 0.3% so that the rounds go on
  long enough to see it): the burn-in is what makes the design valid under such a cost.
- A real +3% for b with the defaults: "better" in at least 18 plans of 20 (at most 40 rounds).
Seeds are fixed; the file takes about 20 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from pgdyno.experiment.rounds import Adaptive, RoundLog, RoundLoop, RoundPlan, judge_round
from pgdyno.experiment.schedule import Schedule
from pgdyno.experiment.switching import PairOrders, measured_window, period_end
from pgdyno.plan.model import DEFAULT_BURN_IN_S, DEFAULT_PERIOD_S
from pgdyno.records.health import RunHealth
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.family import PLAN_ALPHA
from pgdyno.stats.verdict import BETTER, SAME
from simulate import upper_bound

ROUNDS = 40  # the budget, in rounds (pairs of periods)
SETS = ("a", "b")
SEED = 3320


@dataclass
class Switching:
    """Per-second log TPS of one pgbench run, the sets taking turns by periods."""

    rng: np.random.Generator
    burn_in_s: float
    period_s: float = DEFAULT_PERIOD_S
    b_change: float = 0.0  # b's true effect, on the log scale
    dip: float = math.log1p(-0.30)  # a switch into b, at the switch (log scale)
    dip_s: float = 0.1  # its time constant
    clock: float = 1000.0  # epoch seconds
    level: float = 0.0
    current: str = "a"
    runs: list[RunOutcome] = field(default_factory=list)

    def now(self) -> float:
        return self.clock

    def period(self, name: str, round_no: int) -> None:
        begun = self.clock
        if self.runs and len(self.runs) % 2 == 0:
            begun += float(self.rng.uniform(0.0, 0.3))  # the look after a round
        switched_at = begun + float(self.rng.uniform(0.02, 0.2))  # a reload
        into_b = name == "b" and self.current != "b"
        self.current = name
        ended_at = period_end(begun, switched_at, int(self.period_s), self.burn_in_s)
        window = measured_window(switched_at, ended_at, self.burn_in_s)
        seconds = np.arange(window.first, window.last + 1) + 0.5  # each second's middle
        walk = self.level + np.cumsum(self.rng.normal(0.0, 0.001, seconds.size))
        self.level = float(walk[-1]) if seconds.size else self.level
        log_tps = 10.0 + walk + self.rng.normal(0.0, 0.015, seconds.size)
        if name == "b":
            log_tps += self.b_change
        if into_b:
            log_tps += self.dip * np.exp(-(seconds - switched_at) / self.dip_s)
        tps = float(np.mean(np.exp(log_tps)))
        self.runs.append(RunOutcome(
            len(self.runs) + 1, name, "ok", "select-only", 1, 1, round_no, tps, 1.0, 0.5,
            RunHealth(), "18",
        ))  # fmt: skip
        self.clock = ended_at


def run_plan(noise: Switching, seed: int, precision_pct: float) -> str:
    """The first TPS verdict of b against a at any look (SAME: none)."""
    plan = RoundPlan(SETS, "a", "sets")
    adaptive = Adaptive(precision_pct, budget_s=ROUNDS * 2 * (noise.period_s + 0.5))
    log = RoundLog(adaptive, clock=noise.now)
    verdicts: list[str] = []

    def after(round_no: int) -> bool:
        found = judge_round(noise.runs, plan, adaptive, log, round_no)
        change = next(r.tps_change for r in found.results if r.set_name == "b")
        verdicts.append(change.verdict if change is not None else SAME)
        return log.decision is not None and log.decision.stop

    RoundLoop(Schedule(SETS, PairOrders(seed)), log, noise.period, after, str).run()
    return next((v for v in verdicts if v != SAME), SAME)  # any verdict at any look


def plans(
    count: int,
    burn_in_s: float,
    b_change: float = 0.0,
    precision: float = 1.0,
    period_s: float = DEFAULT_PERIOD_S,
    dip_s: float = 0.1,
) -> list[str]:
    return [
        run_plan(
            Switching(np.random.default_rng(SEED + i), burn_in_s, period_s, b_change, dip_s=dip_s),
            SEED + i,
            precision,
        )
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("period_s", "burn_in_s", "dip_s", "count"),
    [(DEFAULT_PERIOD_S, DEFAULT_BURN_IN_S, 0.1, 200), (5.0, 1.5, 0.5, 60)],
    ids=["defaults", "slow-dip-longer-burn-in"],
)
def test_the_burn_in_keeps_an_aa_comparison_valid_under_a_switch_cost(
    period_s: float, burn_in_s: float, dip_s: float, count: int
) -> None:
    kept = plans(count, burn_in_s=burn_in_s, period_s=period_s, dip_s=dip_s)
    hits = sum(v != SAME for v in kept)
    print(
        f"A/A by switching every {period_s:.0f} s, b dips 30% ({dip_s:g} s) at each switch "
        f"into it: burn-in {burn_in_s:g} s {hits}/{count} false verdicts (95% upper bound "
        f"{upper_bound(hits, count):.3f})"
    )
    assert upper_bound(hits, count) <= PLAN_ALPHA


def test_without_a_burn_in_the_switch_cost_biases_the_verdict() -> None:
    bare = plans(20, burn_in_s=0.0, precision=0.3, dip_s=0.5)
    biased = sum(v != SAME for v in bare) / len(bare)
    print(
        f"no burn-in: {biased:.2f} false verdicts "
        f"(MC se {math.sqrt(biased * (1 - biased) / 20):.2f}, 20 plans)"
    )
    assert biased >= 0.5  # the same plans without a burn-in: the simulation sees the bias


def test_a_real_change_is_found_by_switching() -> None:
    found = plans(20, burn_in_s=DEFAULT_BURN_IN_S, b_change=math.log1p(0.03))
    assert sum(v == BETTER for v in found) >= 18, found
