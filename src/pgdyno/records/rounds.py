"""What the rounds of a `compare` (or an adaptive `bench`) did: experiment/rounds.py's RoundLog
records them, the store keeps them with the comparison, the renderers and the report read them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RoundHistory:
    """The rounds so far: how many, in which orders, how long, and why they stopped."""

    mode: str  # fixed / adaptive
    rounds: int
    order: tuple[tuple[str, ...], ...]  # per round, the sets (or cells) in the order they ran
    seconds: float  # machine time of all rounds
    stopped: str | None  # resolved / budget / max rounds / repeats; None before the first round
    unresolved: int | None = None  # intervals left unresolved when adaptive rounds stopped
    more_rounds: int | None = None  # estimated rounds that would resolve them
    more_seconds: float | None = None  # the same in machine time
    precision_pct: float | None = None  # adaptive only: the precision asked for
    budget_s: float | None = None  # adaptive only: the machine-time budget
    # How the orders were made (experiment/schedule.py): "balanced" (drawn from `seed`),
    # "rotation" (every comparison stored before issue 33), "in order" (bench, noise).
    design: str = "rotation"
    seed: int | None = None  # what replays a drawn design's orders (`compare --seed`)
    # adaptive only: the rounds the budget held at the first round's duration, which the
    # always-valid interval's mixture is tuned to (pgdyno.stats.sequential.mixture_for_rounds)
    mixture_rounds: int | None = None

    @property
    def adaptive(self) -> bool:
        return self.mode == "adaptive"
