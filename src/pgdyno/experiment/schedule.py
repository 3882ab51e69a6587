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


def _chained_search(n: int) -> tuple[Row, ...]:
    """For an even number of sets: n rows, row t running from set t to set t + 1 (so each row
    starts where the one before it ended, cyclically), every ordered pair of different sets
    adjacent exactly once within the rows and every set once at every position: a Williams
    square (row-complete Latin square) whose rows chain. Found by a depth-first search, once
    per number of sets (the cyclic squares never chain: their rows all end n/2 after they
    start)."""
    rows = [[t, *([-1] * (n - 2)), (t + 1) % n] for t in range(n)]
    used: set[tuple[int, int]] = set()
    columns: list[set[int]] = [set() for _ in range(n)]
    cells = [(t, p) for t in range(n) for p in range(1, n - 1)]

    def fill(i: int) -> bool:
        if i == len(cells):
            return True
        t, p = cells[i]
        row, last = rows[t], rows[t][n - 1]
        before = row[p - 1]
        for v in range(n):
            arcs = [(before, v), *([(v, last)] if p == n - 2 else [])]
            if v in row[:p] or v == last or v in columns[p] or any(a in used for a in arcs):
                continue
            if len(set(arcs)) < len(arcs):
                continue
            row[p] = v
            used.update(arcs)
            columns[p].add(v)
            if fill(i + 1):
                return True
            used.difference_update(arcs)
            columns[p].discard(v)
            row[p] = -1
        return False

    if not fill(0):  # pragma: no cover - found for every even n the tests cover
        raise ValueError(f"no chained Williams square of {n} sets")
    return tuple(tuple(row) for row in rows)


@cache
def chained_rows(n: int) -> tuple[Row, ...]:
    """One block of the balanced design for `n` sets: rows (rounds) of the set indices, each
    starting with the set the row before it ended with (the block closes into a cycle).

    >>> chained_rows(2), chained_rows(1)
    (((0, 1), (1, 0)), ((0,),))
    """
    if n <= 2:
        return ((0, 1), (1, 0)) if n == 2 else ((0,),) * max(n, 0)
    return _williams_pair(n) if n % 2 else _chained_search(n)


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
    square of n rows (Williams 1949, "Experimental designs balanced for the estimation of
    residual effects of treatments"; Jones & Kenward, "Design and Analysis of Cross-Over
    Trials", ch. 4). Its rows are chained: each round starts with the set the round before it
    ended with, so every set also runs right after itself once per round boundary, and the
    block closes into a cycle (a serially balanced sequence, as Finney & Outhwaite 1956,
    "Serially balanced sequences in bioassay", define it). Per block, the rows start at a
    random one, are read forwards or backwards, and the sets are relabelled at random, the
    first set being the one the block before ended with.

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
        else "a Williams square, chained"
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
