"""The schedule is pure and its order comes from a named design; the one run loop is steppable
(a round at a time, then a look), so a search can drive it trial by trial and a design drawn
per round plugs in without touching the loop."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from pgdyno.experiment.rounds import RoundLog, RoundLoop, run_rounds
from pgdyno.experiment.schedule import InOrder, Rotation, Schedule, rotated


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_rotation_is_today_s_order_for_every_round() -> None:
    schedule = Schedule(("a", "b", "c"), Rotation())
    assert schedule.rounds(6) == [rotated("abc", r) for r in range(1, 7)]
    assert schedule.design.name == "rotation"
    assert Schedule(("a", "b", "c"), InOrder()).rounds(2) == [["a", "b", "c"]] * 2


def test_the_schedule_is_the_same_however_often_it_is_asked() -> None:
    schedule = Schedule(tuple("abcd"), Rotation())
    assert schedule.rounds(8) == schedule.rounds(8)
    assert [schedule.round(r) for r in (3, 1, 2)] == [
        schedule.rounds(3)[2], schedule.rounds(3)[0], schedule.rounds(3)[1],
    ]  # fmt: skip


def test_the_loop_runs_one_round_at_a_time_and_judges_between() -> None:
    ran: list[tuple[str, int]] = []
    looks: list[int] = []

    def after(round_no: int) -> bool:
        looks.append(round_no)
        return round_no == 3

    log = RoundLog(None, clock=Clock())
    loop = RoundLoop(Schedule(("a", "b"), Rotation()), log, lambda u, r: ran.append((u, r)),
                     after, str)  # fmt: skip
    assert loop.run_round() == ["a", "b"]
    assert ran == [("a", 1), ("b", 1)] and looks == []  # nothing judged until asked
    assert loop.judge() is False and looks == [1]
    assert loop.run() == 3  # runs on from where the steps left it
    assert ran[2:] == [("b", 2), ("a", 2), ("a", 3), ("b", 3)]
    assert log.orders == [["a", "b"], ["b", "a"], ["a", "b"]] and len(log.durations) == 3


def test_run_rounds_is_the_loop_over_the_rotation() -> None:
    seen: list[str] = []
    rounds = run_rounds("abc", RoundLog(None), lambda u, r: seen.append(u), lambda r: r == 2, str)
    assert rounds == 2 and "".join(seen) == "abcbca"


@dataclass(frozen=True)
class Shuffled:
    """A design drawn per round from a seed (the shape issue 33's balanced designs take)."""

    seed: int
    name: str = "shuffled"

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        drawn = list(units)
        random.Random(self.seed * 1_000_003 + round_no).shuffle(drawn)
        return drawn


def test_a_design_drawn_per_round_plugs_into_the_loop_and_replays_from_its_seed() -> None:
    def orders(seed: int) -> list[list[str]]:
        log = RoundLog(None, clock=Clock())
        RoundLoop(Schedule(tuple("abc"), Shuffled(seed)), log, lambda u, r: None,
                  lambda r: r == 12, str).run()  # fmt: skip
        return log.orders

    assert orders(7) == orders(7)  # the seed replays the comparison's orders
    assert all(sorted(order) == ["a", "b", "c"] for order in orders(7))
    assert len({tuple(order) for order in orders(7)}) > 1  # drawn anew each round
