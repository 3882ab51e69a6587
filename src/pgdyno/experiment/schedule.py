"""The schedule of a measurement: rounds of units (sets of a comparison, cells of a bench), the
order within each round drawn by a named design. Pure: no server, no clock, no store.

A design is an object with a `name` (recorded with the rounds, so a reader knows how the orders
were made) and `order(units, round_no)`. `Rotation` is the cyclic rotation `compare` has always
used before issue 33 (A B C, B C A, C A B): every set runs first, second, ... equally often, but
not after every other set equally often. `InOrder` keeps the units as given every round (bench
and noise). `Balanced` (compare's default) draws each block of rounds at random from a seed
from a design in which every set runs right after every set, itself included, equally often,
counted across round boundaries (see `Balanced`). The round loop
(`pgdyno.experiment.rounds.RoundLoop`) asks the design for each round's order and never needs
to know which design it holds; it records the design's `name` and `seed` with the rounds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import numpy as np


class Design(Protocol):
    """How the units of a round are ordered; `name` is what the results call it, `seed` what
    replays its orders (None: a design that draws nothing)."""

    @property
    def name(self) -> str: ...

    @property
    def seed(self) -> int | None: ...

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
    seed: None = None

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        return rotated(units, round_no)


@dataclass(frozen=True)
class InOrder:
    """The units in the order given, every round (a bench sweep: one dataset at a time).

    >>> InOrder().order("abc", 2)
    ['a', 'b', 'c']
    """

    name: str = "in order"
    seed: None = None

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        return list(units)


Row = tuple[int, ...]


def _williams_pair(n: int) -> tuple[Row, ...]:
    """For an odd number of sets: Williams's (1949) pair of Latin squares (the cyclic square of
    the sequence 0, 1, n-1, 2, n-2, ... and its mirror image), its 2n rows chained so that each
    row starts with the set the row before it ended with, the last row ending with the set the
    first starts with. Every ordered pair of different sets is adjacent twice within the rows;
    every set is at every position twice.

    >>> _williams_pair(3)
    ((0, 1, 2), (2, 0, 1), (1, 2, 0), (0, 2, 1), (1, 0, 2), (2, 1, 0))
    """
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    step = first[-1]  # (n + 1) / 2: prime to n, so the chain below visits every row
    squares = [tuple((x + k) % n for x in first) for k in range(n)]
    keys = [(j * step) % n for j in range(n)]
    return (
        *(squares[k] for k in keys),
        *(tuple(reversed(squares[k])) for k in reversed(keys)),
    )


def _williams_square(n: int) -> list[Row]:
    """Williams's (1949) square for an even number of sets: the cyclic square of 0, 1, n-1, 2,
    n-2, ..., n/2, in which every ordered pair of different sets is adjacent exactly once.

    >>> _williams_square(4)
    [(0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1)]
    """
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    return [tuple((x + k) % n for x in first) for k in range(n)]


def _chained(rows: list[Row]) -> tuple[Row, ...]:
    """The rows in an order where each starts with the set the one before ended with, the
    last ending with the set the first starts with: an Eulerian circuit (Hierholzer) of the
    graph whose arcs are the rows, from their first set to their last (every set starts as
    many rows as it ends; the caller makes the graph connected)."""
    starting: dict[int, list[int]] = {}
    for i in reversed(range(len(rows))):
        starting.setdefault(rows[i][0], []).append(i)
    at, taken, circuit = [rows[0][0]], [], []
    while at:
        if starting.get(at[-1]):
            i = starting[at[-1]].pop()
            at.append(rows[i][-1])
            taken.append(i)
        else:
            at.pop()
            if taken:
                circuit.append(taken.pop())
    return tuple(rows[i] for i in reversed(circuit))


def _williams_even(n: int) -> tuple[Row, ...]:
    """For an even number n >= 4 of sets: Williams's square and the mirror image of a
    relabelled copy of it, 2n rows chained (every row of the cyclic square ends n/2 after it
    starts, so one square alone never chains; the relabelling x -> x for x < n/2, x -> x + 1
    within n/2..n-1 otherwise, links its start/end pairs into one cycle). Every ordered pair
    of different sets is adjacent twice within the rows, every set at every position twice.

    >>> rows = _williams_even(6)
    >>> len(rows), all(a[-1] == b[0] for a, b in zip(rows, rows[1:] + rows[:1]))
    (12, True)
    """
    half = n // 2
    relabel = [x if x < half else half + (x - half + 1) % half for x in range(n)]
    square = _williams_square(n)
    mirrored = [tuple(relabel[x] for x in reversed(row)) for row in square]
    return _chained([*square, *mirrored])


@cache
def chained_rows(n: int) -> tuple[Row, ...]:
    """One block of the balanced design for `n` sets: rows (rounds) of the set indices, each
    starting with the set the row before it ended with (the block closes into a cycle).

    >>> chained_rows(2), chained_rows(1)
    (((0, 1), (1, 0)), ((0,),))
    """
    if n <= 2:
        return ((0, 1), (1, 0)) if n == 2 else ((0,),) * max(n, 0)
    return _williams_pair(n) if n % 2 else _williams_even(n)


def _drawn(rows: tuple[Row, ...], rng: np.random.Generator, start: int | None) -> list[Row]:
    """One block drawn: the rows from a random one on (cyclically), read backwards or not,
    the sets relabelled at random, so that the block's first set is `start` (the set the block
    before ended with) when there was one. Each step keeps the block's balance."""
    n = len(rows[0])
    shift = int(rng.integers(len(rows)))
    block = [*rows[shift:], *rows[:shift]]
    if rng.random() < 0.5:
        block = [tuple(reversed(row)) for row in reversed(block)]
    labels = [int(x) for x in rng.permutation(n)]
    if start is not None:  # swap so the first set is `start`: uniform among such relabellings
        here, there = block[0][0], labels.index(start)
        labels[here], labels[there] = labels[there], labels[here]
    return [tuple(labels[x] for x in row) for row in block]


@cache
def _blocks(n: int, seed: int, count: int) -> tuple[tuple[Row, ...], ...]:
    """The first `count` blocks of the design for `n` sets drawn from `seed`."""
    if count == 0:
        return ()
    before = _blocks(n, seed, count - 1)
    rng = np.random.default_rng([seed, n, count])
    start = before[-1][-1][-1] if before else None
    return (*before, tuple(_drawn(chained_rows(n), rng, start)))


def balanced_order(n: int, seed: int, round_no: int) -> Row:
    """The set indices of round `round_no` (1-based) of the balanced design for `n` sets.

    >>> [balanced_order(2, 7, r) for r in range(1, 5)]
    [(1, 0), (0, 1), (1, 0), (0, 1)]
    """
    rows = chained_rows(n)
    if not rows:
        return ()
    block, row = divmod(round_no - 1, len(rows))
    return _blocks(n, seed, block + 1)[block][row]


def carryover_counts[T](runs: Sequence[T]) -> Counter[tuple[T, T]]:
    """How often each unit ran right after each unit (itself included) in a run sequence.

    >>> sorted(carryover_counts("abba").items())
    [(('a', 'b'), 1), (('b', 'a'), 1), (('b', 'b'), 1)]
    """
    return Counter(itertools.pairwise(runs))


@dataclass(frozen=True)
class Balanced:
    """Orders drawn at random per block of rounds from `seed`, balanced for the set that ran
    before, counted across round boundaries (the last run of a round precedes the first of
    the next).

    A block is `chained_rows(n)`: for two sets A B, B A (the ABBA block); for an odd number n
    of sets the 2n rows of Williams's pair of Latin squares; for an even n >= 4 a Williams
    square and the mirror image of a relabelled copy, 2n rows (Williams 1949, "Experimental
    designs balanced for the estimation of residual effects of treatments"; Jones & Kenward,
    "Design and Analysis of Cross-Over Trials", ch. 4). Its rows are chained: each round
    starts with the set the round before it ended with, so every set also runs right after
    itself at round boundaries, and the block closes into a cycle (a serially balanced
    sequence, as Finney & Outhwaite 1956, "Serially balanced sequences in bioassay", define
    it). Per block, the rows start at a random one, are read forwards or backwards, and the
    sets are relabelled at random, the first set being the one the block before ended with.
    With two sets that makes every block A B B A (or every one B A A B): ABBA and BAAB blocks
    mixed would break the balance at each change (A B B A B A A B: b runs after a three
    times, a after a once).

    Exactly balanced: after every complete block, every set has run right after every set
    (itself included) equally often, except that the comparison's first run has no run
    before it; every set has run at every position of the round equally often (as the
    rotation gave). So an effect of the set that ran before (a checkpoint it left, a cache it
    cooled) falls on every set alike, instead of favouring the sets the rotation placed after
    a harmless one. Between two complete blocks the counts are off by at most the rows of one
    block.

    >>> d = Balanced(seed=33)
    >>> runs = [s for r in range(1, 13) for s in d.order("abc", r)]
    >>> sorted(set(carryover_counts(runs).values())), len(carryover_counts(runs))
    ([3, 4], 9)
    >>> d.order("abc", 1) == Balanced(seed=33).order("abc", 1), d.name
    (True, 'balanced')
    """

    seed: int
    name: str = "balanced"

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        return [units[i] for i in balanced_order(len(units), self.seed, round_no)]

    def block_rounds(self, n: int) -> int:
        """The rounds of one complete block for `n` sets (after which the counts are equal)."""
        return len(chained_rows(n))


def orders_note(n: int) -> str:
    """What `plan check` says of the orders `compare` will draw for `n` sets, and why.

    >>> print(orders_note(3))
    orders: balanced design (Williams's pair of Latin squares, chained), blocks of 6 rounds drawn at random from a seed that is printed and stored (`compare --seed N` replays it): in every complete block each set runs at every position and right after every set (itself included) equally often, so what a set leaves for the next run favours no set.
    """  # noqa: E501
    if n < 2:
        return "orders: one set, nothing to order."
    kind = (
        "ABBA blocks"
        if n == 2
        else "Williams's pair of Latin squares, chained"
        if n % 2
        else "a Williams square and a relabelled mirror image, chained"
    )
    return (
        f"orders: balanced design ({kind}), blocks of {len(chained_rows(n))} rounds drawn at "
        "random from a seed that is printed and stored (`compare --seed N` replays it): in "
        "every complete block each set runs at every position and right after every set "
        "(itself included) equally often, so what a set leaves for the next run favours no "
        "set."
    )


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
