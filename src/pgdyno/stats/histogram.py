"""A latency histogram with fixed memory and a proven bound on the error of its quantiles.

Bucket scheme (log-linear, in units of 1/128 µs). A value ``v`` µs becomes
``u = floor(v * 128)``. Below ``u = 256`` (``v < 2`` µs) every ``u`` has its own bucket, 1/128 µs
wide. Above, ``u`` lies in an octave ``[2^k, 2^(k+1))`` with ``k >= 8``, cut into 128 buckets of
equal width ``2^(k-7)`` units; the bucket index is ``(b << 7) + (u >> b)`` with ``b = k - 7``,
which is also ``u`` itself below 256. 36 octaves of microseconds are covered (up to 2^36 µs,
about 19 hours) in 4,736 buckets: one list of counts, whatever the number of values.

A bucket stands for its lower bound when it is at most 1 µs wide (below 256 µs) and for its
midpoint otherwise.

Error bound. Take any ``v`` with ``1 <= v < 2^36`` µs in a bucket ``[lo, lo + w)``:

* ``v < 2`` µs: ``w = 1/128`` µs and the representative is ``lo``, so the error is below
  ``w / v <= 1/128``.
* otherwise ``lo = s * w`` with ``s`` the top 8 bits of ``u``, ``128 <= s < 256``; below 256 µs
  the representative is ``lo`` and the error is below ``w / lo <= 1/128``, above it is the
  midpoint and the error is at most ``(w / 2) / lo <= 1/256``.

So a quantile (the value of a given rank, looked up in the bucket holding that rank) is within
1/128 (0.78%) of the exact one from 1 µs to 19 hours; for whole microseconds, as pgbench logs
them, it is exact below 256 µs and within 1/256 (0.39%) above. The exact minimum and maximum
are kept too and bound every answer, so rank 1 and rank n are exact. Below 1 µs the error is
less than 1/128 µs; values of 2^36 µs or more share the top bucket.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from fractions import Fraction
from itertools import accumulate, islice
from operator import add, mul
from typing import cast

__all__ = ["BUCKETS", "LatencyHistogram", "bucket_index", "bucket_value"]

_SUB_BITS = 7  # 128 buckets per octave
_SCALE = 1 << _SUB_BITS  # units per microsecond
_TOP_OCTAVE = 36  # values up to 2^36 µs
BUCKETS = (_TOP_OCTAVE + 1) << _SUB_BITS  # 4736
_LAST = BUCKETS - 1
_ZERO_COUNTS = (0,) * BUCKETS


def bucket_index(us: float) -> int:
    """The bucket holding ``us`` microseconds (``us >= 0``).

    >>> bucket_index(0), bucket_index(1), bucket_index(255), bucket_index(1000)
    (0, 128, 1151, 1402)
    """
    u = us << _SUB_BITS if type(us) is int else int(us * _SCALE)
    b = u.bit_length() - 8
    if b <= 0:
        return u
    i = (b << _SUB_BITS) + (u >> b)
    return i if i < BUCKETS else _LAST


def bucket_value(index: int) -> float:
    """The value a bucket stands for: its lower bound up to 1 µs wide, else its midpoint.

    >>> bucket_value(bucket_index(255)), bucket_value(bucket_index(1000))
    (255.0, 1002.0)
    """
    if index < 2 * _SCALE:
        return index / _SCALE
    b = (index >> _SUB_BITS) - 1
    lo = (index - (b << _SUB_BITS)) << b
    width = 1 << b
    if width <= _SCALE:
        return lo / _SCALE
    return (lo + width / 2) / _SCALE


# Bucket indices of whole microseconds seen lately: pgbench logs the same few thousand values
# over and over, and a dictionary look-up is cheaper than the arithmetic.
_INDEX_CACHE: dict[float, int] = {}
_INDEX_CACHE_SIZE = 1 << 16


def _cached_index(us: float) -> int:
    i = bucket_index(us)
    if type(us) is int:
        if len(_INDEX_CACHE) >= _INDEX_CACHE_SIZE:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[us] = i
    return i


def _check(us: float) -> None:
    if not us >= 0 or us == math.inf:  # also rejects NaN
        raise ValueError(f"a latency must be a finite number >= 0, not {us!r}")


def _weighted_total(counts: Mapping[int, int] | Mapping[float, int]) -> float:
    """The sum of value times count, after checking every count and value is allowed."""
    if min(counts.values()) < 0:
        raise ValueError("counts must be >= 0")
    weighted: float = sum(map(mul, counts.keys(), counts.values()))
    if isinstance(weighted, float) and not math.isfinite(weighted):
        for us in counts:  # find the NaN or infinity before changing anything
            _check(us)
    return weighted


class LatencyHistogram:
    """Counts of latencies in microseconds, in log-linear buckets (see the module docstring).

    >>> h = LatencyHistogram()
    >>> for us in (120, 80, 100, 100, 5000):
    ...     h.record(us)
    >>> h.count, h.min, h.max, h.mean
    (5, 80, 5000, 1080.0)
    >>> h.quantile(0.5), h.quantile(0.9), h.quantile(1.0)
    (100.0, 5000.0, 5000.0)
    >>> LatencyHistogram().quantile(0.5) is None
    True
    """

    __slots__ = ("_count", "_counts", "_max", "_min", "_total")

    def __init__(self) -> None:
        self._counts: list[int] | None = None  # allocated on the first value
        self._count = 0
        self._total = 0.0
        self._min: float | None = None
        self._max: float | None = None

    def _cells(self) -> list[int]:
        if self._counts is None:
            self._counts = [0] * BUCKETS
        return self._counts

    @property
    def count(self) -> int:
        """Number of values recorded."""
        return self._count

    @property
    def min(self) -> float | None:
        """The exact smallest value, or None when empty."""
        return self._min

    @property
    def max(self) -> float | None:
        """The exact largest value, or None when empty."""
        return self._max

    @property
    def mean(self) -> float | None:
        """The exact mean, or None when empty."""
        return self._total / self._count if self._count else None

    @property
    def stddev(self) -> float | None:
        """The sample standard deviation, from the buckets' representatives around the exact
        mean (each value off by at most a bucket's width); None with fewer than 2 values.

        >>> h = LatencyHistogram()
        >>> h.record_counts({100: 1, 200: 1, 300: 1})
        >>> round(h.stddev)  # exactly 100; buckets are 1/128 of an octave wide
        101
        """
        if self._count < 2 or self._counts is None:
            return None
        mean = self._total / self._count
        squares = sum(c * (bucket_value(i) - mean) ** 2 for i, c in enumerate(self._counts) if c)
        return math.sqrt(squares / (self._count - 1))

    @property
    def nbytes(self) -> int:
        """Size of the list of bucket counts: 0 until the first value, then always the same."""
        return 0 if self._counts is None else sys.getsizeof(self._counts)

    def record(self, us: float, count: int = 1) -> None:
        """Add ``count`` occurrences of a latency of ``us`` microseconds.

        >>> h = LatencyHistogram()
        >>> h.record(1500.5, 3)
        >>> h.count, h.quantile(0.5)
        (3, 1500.5)
        """
        _check(us)
        if count <= 0:
            if count == 0:
                return
            raise ValueError(f"count must be >= 0, not {count}")
        self._cells()[bucket_index(us)] += count
        self._count += count
        self._total += us * count
        if self._min is None or us < self._min:
            self._min = us
        if self._max is None or us > self._max:
            self._max = us

    def record_counts(self, counts: Mapping[int, int] | Mapping[float, int]) -> None:
        """Add many values at once: ``counts`` maps a latency in µs to how often it occurred.

        >>> h = LatencyHistogram()
        >>> h.record_counts({100: 2, 300: 1})
        >>> h.count, h.mean
        (3, 166.66666666666666)
        """
        if not counts:
            return
        weighted = _weighted_total(counts)
        low, high = min(counts), max(counts)
        _check(low)
        n = sum(counts.values())
        if n == 0:
            return
        self._add_to_cells(counts)
        if min(counts.values()) == 0:  # zero counts must not move the extremes
            present = [us for us, k in counts.items() if k]
            low, high = min(present), max(present)
        self._count += n
        self._total += weighted
        self._widen(low, high)

    def _add_to_cells(self, counts: Mapping[int, int] | Mapping[float, int]) -> None:
        cells = self._cells()
        keys = list(counts)
        found = list(map(_INDEX_CACHE.get, keys))
        if None in found:
            found = [
                _cached_index(us) if i is None else i for us, i in zip(keys, found, strict=True)
            ]
        for i, k in zip(cast(list[int], found), counts.values(), strict=True):
            cells[i] += k

    def _widen(self, low: float, high: float) -> None:
        """Take ``low`` and ``high`` into the extremes."""
        if self._min is None or low < self._min:
            self._min = low
        if self._max is None or high > self._max:
            self._max = high

    def merge(self, other: LatencyHistogram) -> None:
        """Add every value of ``other`` to this histogram.

        >>> a, b = LatencyHistogram(), LatencyHistogram()
        >>> a.record(10); b.record(30); a.merge(b)
        >>> a.count, a.min, a.max
        (2, 10, 30)
        """
        if other._counts is None or other._count == 0:
            return
        cells = self._cells()
        lo, hi = other._span()  # its other cells are 0: only this range is added
        cells[lo:hi] = map(add, islice(cells, lo, hi), islice(other._counts, lo, hi))
        self._count += other._count
        self._total += other._total
        assert other._min is not None and other._max is not None
        self._widen(other._min, other._max)

    def _span(self) -> tuple[int, int]:
        """The range of buckets that can hold values: from the minimum's to the maximum's."""
        if self._min is None or self._max is None:
            return 0, 0
        return bucket_index(self._min), bucket_index(self._max) + 1

    def reset(self) -> None:
        """Forget every value; the bucket list is kept for reuse."""
        if self._counts is not None and self._count:
            lo, hi = self._span()
            self._counts[lo:hi] = _ZERO_COUNTS[: hi - lo]
        self._count = 0
        self._total = 0.0
        self._min = self._max = None

    def quantile(self, q: float) -> float | None:
        """The value of rank ``ceil(q * n)`` (at least 1), or None when empty.

        ``q`` is read as the decimal it prints as, so ``0.999`` of 1000 values is rank 999.
        The answer is the representative of the bucket holding that rank, kept within the
        exact minimum and maximum.
        """
        return self.quantiles((q,))[0]

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        """:meth:`quantile` for several ``q`` in one pass over the buckets.

        >>> h = LatencyHistogram()
        >>> h.record_counts({1000: 99, 20000: 1})
        >>> h.quantiles([0.5, 0.99, 0.999])
        [1002.0, 1002.0, 20000.0]
        """
        qs = list(qs)
        for q in qs:
            if not 0.0 <= q <= 1.0:
                raise ValueError(f"a quantile must be between 0 and 1, not {q!r}")
        n = self._count
        if n == 0 or self._counts is None:
            return [None] * len(qs)
        low, high = self._min, self._max
        assert low is not None and high is not None
        lo, hi = self._span()  # the buckets that can hold values
        cumulative: list[int] | None = None
        out: list[float | None] = []
        for q in qs:
            rank = max(1, math.ceil(Fraction(repr(q)) * n))
            if rank == 1:
                out.append(float(low))
            elif rank >= n:
                out.append(float(high))
            else:
                if cumulative is None:
                    cumulative = list(accumulate(islice(self._counts, lo, hi)))
                value = bucket_value(lo + bisect_left(cumulative, rank))
                out.append(float(min(max(value, low), high)))
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        if self._count != other._count:
            return False
        if self._count == 0:
            return True
        return (
            self._counts == other._counts
            and self._total == other._total
            and self._min == other._min
            and self._max == other._max
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"LatencyHistogram(count={self._count}, min={self._min}, max={self._max}, "
            f"p50={self.quantile(0.5)})"
        )
