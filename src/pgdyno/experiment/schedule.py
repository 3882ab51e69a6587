"""The schedule of a measurement: rounds of units (sets of a comparison, cells of a bench), the
order within each round drawn by a named design. Pure: no server, no clock, no store.

A design is an object with a `name` (recorded with the rounds, so a reader knows how the orders
were made) and `order(units, round_no)`. `Rotation` is the cyclic rotation `compare` has always
used (A B C, B C A, C A B): every set runs first, second, ... equally often. `InOrder` keeps the
units as given every round (bench and noise). A design drawn per round from a seed (a Williams
square for three or more sets, ABBA/BAAB blocks for two: issue 33) is one more class with the
same two members; the round loop (`pgdyno.experiment.rounds.RoundLoop`) asks it for each
round's order and never needs to know which design it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Design(Protocol):
    """How the units of a round are ordered; `name` is what the results call it."""

    @property
    def name(self) -> str: ...

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]: ...


def rotated[T](items: Sequence[T], round_no: int) -> list[T]:
    """The order of round `round_no` (1-based): the items rotated by one each round.

    >>> [rotated("abc", r) for r in (1, 2, 3, 4)]
    [['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['a', 'b', 'c']]
    """
    if not items:
        return []
    k = (round_no - 1) % len(items)
    return [*items[k:], *items[:k]]


@dataclass(frozen=True)
class Rotation:
    """The units rotated by one from round to round (`rotated`): a position effect (the first
    run after a restart is slower) falls on every set equally often.

    >>> Rotation().order("ab", 2), Rotation().name
    (['b', 'a'], 'rotation')
    """

    name: str = "rotation"

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        return rotated(units, round_no)


@dataclass(frozen=True)
class InOrder:
    """The units in the order given, every round (a bench sweep: one dataset at a time).

    >>> InOrder().order("abc", 2)
    ['a', 'b', 'c']
    """

    name: str = "in order"

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        return list(units)


@dataclass(frozen=True)
class Schedule[T]:
    """Rounds of `units`, each round in the order `design` draws for it.

    >>> s = Schedule(("a", "b", "c"), Rotation())
    >>> [s.round(r) for r in (1, 2)]
    [['a', 'b', 'c'], ['b', 'c', 'a']]
    >>> s.rounds(2)
    [['a', 'b', 'c'], ['b', 'c', 'a']]
    """

    units: tuple[T, ...]
    design: Design

    def round(self, round_no: int) -> list[T]:
        """The units of round `round_no` (1-based) in the order they run."""
        return self.design.order(self.units, round_no)

    def rounds(self, count: int) -> list[list[T]]:
        """The first `count` rounds (what a progress bar or a plan check shows ahead)."""
        return [self.round(r) for r in range(1, count + 1)]
