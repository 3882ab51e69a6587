"""Why the per-run design leaves disturbed runs out instead of adjusting for them (issue 33,
section 2, "Covariates"), through the real round loop.

Switching inside one run keeps disturbed periods and adjusts each round's difference for its
periods' measured interference (`pgdyno.stats.covariates`): valid because each round's order is
a fair coin (`PairOrders`), so the covariate's sign is randomised round by round. The per-run
design orders its runs by the carry-over balanced design (`Balanced`): with two sets every
block is A B B A (or every one B A A B), one draw for the whole comparison, so which set runs
at which time is fixed by the design, not randomised per round. This file drives the real
`RoundLoop` with the real `Balanced` orders and the real look `judge_round` (analysis,
adjustment, always-valid intervals, `decide`) on simulated whole runs (`Host.run`: log TPS with
1.5% per-run noise; other processes take a share of the machine, each run losing 0.8 of it,
measured within a point and recorded only above the 5% limit, as the engine records it), and
judges the same runs two ways: "adjusted" (the disturbed runs kept and adjusted, as switched
periods are: `RoundLog.design` set to the switching design's name) and "discard" (the per-run
rule: disturbed runs left out).

The claim tested (fixed seeds, 40 A/A plans of at most 30 rounds per rule, a few seconds): a
job on a cycle of four runs (on during the 2nd and 3rd run of every four, taking 30% of the
machine) lines up with the A B B A blocks and always hits set b: "adjusted" calls an A/A
comparison in at least 30 of 40 plans (the covariate never changes sign, so no slope is
learnt and the runs' loss is read as b's), "discard" in at most 2 (its 95% Clopper-Pearson
upper bound then at most 0.15; the plan-wide level is 0.05).

With bursts at random times instead (`python tests/unit/test_per_run_adjustment_sim.py`:
100 A/A plans and 40 plans with a real +3% per rule, at most 30 rounds; a hog that is on for
80% of runs and keeps its state from run to run with probability 0.8), adjusting does help:
A/A 0/100 for both rules (upper bound 0.030), power 0.62 adjusted against 0.28 discarding
(binomial MC se about 0.08). A rule valid only when the host's load does not follow the
design's cycle is not valid by design, so the per-run design keeps discarding
(tests/unit/test_covariates.py `test_the_per_run_design_still_discards_disturbed_runs`);
docs/statistics.md, "Covariates", has the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pgdyno.collect.interference import is_flagged
from pgdyno.experiment.rounds import Adaptive, RoundLog, RoundLoop, RoundPlan, judge_round
from pgdyno.experiment.schedule import Balanced, Schedule
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.stored import RunOutcome
from pgdyno.stats.analysis import SWITCHED
from pgdyno.stats.verdict import BETTER, SAME
from simulate import upper_bound

RUN_S = 60.0
ROUNDS = 30  # the budget, in rounds
SETS = ("a", "b")
GAMMA = 0.8  # log TPS lost per share of the machine taken
NOISE = 0.015  # per-run log TPS noise (the state a run starts from)


@dataclass
class Host:
    """Whole runs on a host where other processes come and go: `cycle` a job on during the
    2nd and 3rd of every four runs, else bursts that keep their state from run to run with
    probability `stay` and are on with probability `on` when drawn."""

    rng: np.random.Generator
    b_change: float = 0.0
    cycle: bool = False
    stay: float = 0.8
    on: float = 0.8
    clock: float = 0.0
    hog: float = 0.0
    runs: list[RunOutcome] = field(default_factory=list)

    def now(self) -> float:
        return self.clock

    def run(self, name: str, round_no: int) -> None:
        if self.cycle:
            self.hog = 0.3 if len(self.runs) % 4 in (1, 2) else 0.0
        elif self.rng.uniform() > self.stay:
            self.hog = float(self.rng.uniform(0.15, 0.5)) if self.rng.uniform() < self.on else 0.0
        loss = GAMMA * self.hog * (1.0 + float(self.rng.normal(0.0, 0.1)))
        log_tps = 8.0 + float(self.rng.normal(0.0, NOISE)) - loss
        log_tps += self.b_change if name == "b" else 0.0
        measured = Interference(max(0.0, 100.0 * self.hog + float(self.rng.normal(0.0, 1.0))), 0.0)
        self.runs.append(RunOutcome(
            len(self.runs) + 1, name, "ok", "select-only", 1, 1, round_no, math.exp(log_tps),
            1.0, 0.5, RunHealth(), "18", interference=measured if is_flagged(measured) else None,
        ))  # fmt: skip
        self.clock += RUN_S


def run_plan(host: Host, seed: int, rule: str) -> str:
    """The first TPS verdict of b against a at any look (SAME: none) under `rule`."""
    plan = RoundPlan(SETS, "a", "sets")
    adaptive = Adaptive(2.0, budget_s=ROUNDS * 2 * RUN_S)
    log = RoundLog(adaptive, clock=host.now)
    verdicts: list[str] = []

    def after(round_no: int) -> bool:
        found = judge_round(host.runs, plan, adaptive, log, round_no)
        change = next(r.tps_change for r in found.results if r.set_name == "b")
        verdicts.append(change.verdict if change is not None else SAME)
        return log.decision is not None and log.decision.stop

    loop = RoundLoop(Schedule(SETS, Balanced(seed)), log, host.run, after, str)
    if rule == "adjusted":  # judged as switched periods are: disturbed runs kept, adjusted
        log.design = SWITCHED
    loop.run()
    return next((v for v in verdicts if v != SAME), SAME)


def verdicts(
    count: int, rule: str, seed: int, *, b_change: float = 0.0, cycle: bool = False
) -> list[str]:
    return [
        run_plan(Host(np.random.default_rng(seed + i), b_change, cycle), seed + i, rule)
        for i in range(count)
    ]


def test_a_job_on_the_designs_cycle_breaks_the_adjustment_not_the_discarding() -> None:
    adjusted = sum(v != SAME for v in verdicts(40, "adjusted", 3340, cycle=True))
    discard = sum(v != SAME for v in verdicts(40, "discard", 3340, cycle=True))
    print(
        f"A/A per run, a job on a 4-run cycle: adjusted {adjusted}/40 false verdicts, "
        f"discard {discard}/40 (95% upper bound {upper_bound(discard, 40):.3f})"
    )
    assert adjusted >= 30
    assert discard <= 2


def main() -> None:
    """The random-burst figures of docs/statistics.md (about a minute of CPU)."""
    change = math.log1p(0.03)
    for rule in ("adjusted", "discard"):
        aa = sum(v != SAME for v in verdicts(100, rule, 5000))
        power = sum(v == BETTER for v in verdicts(40, rule, 7000, b_change=change)) / 40
        print(f"{rule}: A/A {aa}/100 (95% upper bound {upper_bound(aa, 100):.3f}), "
              f"power for +3% {power:.2f} of 40")  # fmt: skip


if __name__ == "__main__":
    main()
