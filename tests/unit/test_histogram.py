"""LatencyHistogram: quantiles within 1% of the exact ones, merging, memory fixed by design."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgdyno.stats.histogram import BUCKETS, LatencyHistogram, bucket_index, bucket_value

QS = (0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)
HOUR_US = 3_600_000_000
TOP_US = 2**36  # values from here on share the top bucket


def exact_quantile(ordered: list[float], q: float) -> float:
    """The value of rank ceil(q * n), q read as the decimal it prints as."""
    rank = max(1, math.ceil(Fraction(str(q)) * len(ordered)))
    return ordered[rank - 1]


def histogram_of(values: list[float]) -> LatencyHistogram:
    h = LatencyHistogram()
    for v in values:
        h.record(v)
    return h


def assert_quantiles_close(h: LatencyHistogram, values: list[float], tolerance: float) -> None:
    ordered = sorted(values)
    for q, got in zip(QS, h.quantiles(QS), strict=True):
        want = exact_quantile(ordered, q)
        assert got is not None
        assert abs(got - want) <= tolerance * want, (q, got, want)


whole_us = st.integers(min_value=1, max_value=HOUR_US)
any_us = st.floats(min_value=1.0, max_value=float(HOUR_US), allow_nan=False)


@given(st.lists(whole_us, min_size=1, max_size=400))
def test_quantiles_of_whole_microseconds_within_1_percent(values: list[int]) -> None:
    h = histogram_of(values)
    assert_quantiles_close(h, values, 0.01)
    assert_quantiles_close(h, values, 1 / 256)  # the proven bound for whole microseconds


@given(st.lists(any_us, min_size=1, max_size=400))
def test_quantiles_of_any_values_within_1_percent(values: list[float]) -> None:
    h = histogram_of(values)
    assert_quantiles_close(h, values, 0.01)
    assert_quantiles_close(h, values, 1 / 128)  # the proven bound from 1 µs


@given(st.floats(min_value=1.0, max_value=TOP_US, exclude_max=True, allow_nan=False))
def test_every_bucket_stands_for_its_values_within_1_in_128(us: float) -> None:
    assert abs(bucket_value(bucket_index(us)) - us) < us / 128


@given(st.integers(min_value=0, max_value=TOP_US - 1))
def test_whole_microseconds_exact_below_256_and_within_1_in_256_above(us: int) -> None:
    got = bucket_value(bucket_index(us))
    if us < 256:
        assert got == us
    else:
        assert abs(got - us) <= us / 256


def test_bucket_indices_cover_the_range_in_order() -> None:
    assert bucket_index(0) == 0
    assert bucket_index(TOP_US - 1) == BUCKETS - 1
    assert bucket_index(10 * TOP_US) == BUCKETS - 1
    values = [bucket_value(i) for i in range(BUCKETS)]
    assert values == sorted(values) and len(set(values)) == BUCKETS
    # each bucket's value maps back to it
    assert all(bucket_index(v) == i for i, v in enumerate(values))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("sigma", [0.5, 1.5])
def test_skewed_lognormal_data(seed: int, sigma: float) -> None:
    rnd = random.Random(seed)
    values = [rnd.lognormvariate(math.log(1000.0), sigma) for _ in range(50_000)]
    assert_quantiles_close(histogram_of(values), values, 0.01)
    whole = [max(1, round(v)) for v in values]
    h = LatencyHistogram()
    h.record_counts(Counter(whole))
    assert_quantiles_close(h, whole, 0.01)
    assert h.max == max(whole) and h.min == min(whole)
    assert h.mean == pytest.approx(sum(whole) / len(whole))


def test_rank_is_ceil_of_q_times_n_with_q_as_written() -> None:
    # 0.999 * 1000 is 998.9999999999999 in floating point; the rank is still 999, not 1000.
    h = LatencyHistogram()
    h.record_counts({100: 999, 200: 1})
    assert h.quantiles([0.999, 0.9991, 1.0]) == [100.0, 200.0, 200.0]
    h = LatencyHistogram()
    h.record_counts({10: 500, 20: 500})
    assert h.quantiles([0.0, 0.5, 0.5001]) == [10.0, 10.0, 20.0]


def test_extremes_are_exact_and_bound_the_answers() -> None:
    h = LatencyHistogram()
    h.record(1_000_001)
    h.record(1_000_003)
    assert h.quantile(0.0) == 1_000_001 and h.quantile(1.0) == 1_000_003
    # Both share a bucket whose midpoint is outside [min, max]: the answer is clamped.
    assert 1_000_001 <= (h.quantile(0.5) or 0) <= 1_000_003


def test_record_counts_equals_recording_one_by_one() -> None:
    values = [5, 5, 5, 300, 7000, 7000, 123_456_789]
    h = LatencyHistogram()
    h.record_counts(Counter(values))
    assert h == histogram_of(values)
    h.record_counts({})
    h.record_counts({1: 0, 10**9: 0})  # zero counts change nothing
    assert h == histogram_of(values)


@given(st.lists(whole_us, max_size=200), st.lists(whole_us, max_size=200))
def test_merge_equals_recording_everything(a: list[int], b: list[int]) -> None:
    merged = histogram_of(a)
    merged.merge(histogram_of(b))
    assert merged == histogram_of(a + b)
    assert merged.count == len(a) + len(b)
    assert merged.quantiles(QS) == histogram_of(a + b).quantiles(QS)


@given(st.lists(any_us, min_size=1, max_size=200), st.lists(any_us, min_size=1, max_size=200))
def test_merge_of_floats_gives_the_same_quantiles(a: list[float], b: list[float]) -> None:
    merged = histogram_of(a)
    merged.merge(histogram_of(b))
    together = histogram_of(a + b)
    assert merged.quantiles(QS) == together.quantiles(QS)
    assert (merged.min, merged.max, merged.count) == (together.min, together.max, together.count)


def test_memory_does_not_grow_with_count() -> None:
    rnd = random.Random(11)
    small, large = LatencyHistogram(), LatencyHistogram()
    assert small.nbytes == 0  # nothing allocated before the first value
    for _ in range(1_000):
        small.record(rnd.lognormvariate(7.0, 2.0))
    large.record_counts(Counter(int(rnd.lognormvariate(7.0, 2.0)) for _ in range(100_000)))
    for _ in range(10):
        large.merge(large)  # doubles: 102.4 million values
    assert large.count == 100_000 * 2**10
    assert small.nbytes == large.nbytes > 0


def test_memory_after_a_thousand_and_a_million_records() -> None:
    rnd = random.Random(7)
    a, b = LatencyHistogram(), LatencyHistogram()
    for _ in range(1_000):
        a.record(int(rnd.lognormvariate(7.0, 1.0)))
    for _ in range(1_000_000):
        b.record(int(rnd.lognormvariate(7.0, 1.0)))
    assert b.count == 1_000_000
    assert a.nbytes == b.nbytes > 0


def test_empty_histogram() -> None:
    h = LatencyHistogram()
    assert (h.count, h.min, h.max, h.mean) == (0, None, None, None)
    assert h.quantile(0.5) is None and h.quantiles([0.1, 0.9]) == [None, None]
    assert h == LatencyHistogram()


def test_reset_forgets_everything() -> None:
    h = histogram_of([10, 20, 30])
    h.reset()
    assert h == LatencyHistogram() and h.quantile(0.5) is None
    h.record(40)
    assert h.quantiles([0.0, 1.0]) == [40.0, 40.0] and h.count == 1


@given(st.lists(any_us, min_size=1, max_size=100), st.lists(any_us, max_size=100))
def test_a_reset_histogram_is_as_good_as_new(a: list[float], b: list[float]) -> None:
    # merge, reset and quantiles only visit the buckets between the extremes: a reset must
    # still leave no count behind, wherever the next values fall
    h = histogram_of(a)
    h.merge(histogram_of(b))
    h.reset()
    h.merge(histogram_of(b))
    assert h == histogram_of(b) and h.quantiles(QS) == histogram_of(b).quantiles(QS)
    h.reset()
    assert h._counts == [0] * BUCKETS


def test_values_below_one_microsecond_and_above_the_top() -> None:
    h = histogram_of([0, 0, 0.5])
    assert h.quantiles([0.5, 1.0]) == [0.0, 0.5]
    assert abs(bucket_value(bucket_index(0.3)) - 0.3) < 1 / 128
    huge = histogram_of([TOP_US * 4, TOP_US * 8])
    assert huge.quantile(1.0) == TOP_US * 8  # the exact maximum survives


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf])
def test_invalid_values_are_refused(bad: float) -> None:
    h = LatencyHistogram()
    with pytest.raises(ValueError):
        h.record(bad)
    with pytest.raises(ValueError):
        h.record_counts({100: 1, bad: 1})
    assert h == LatencyHistogram()  # nothing was recorded


def test_invalid_counts_and_quantiles_are_refused() -> None:
    h = histogram_of([1])
    with pytest.raises(ValueError):
        h.record(5, -1)
    with pytest.raises(ValueError):
        h.record_counts({5: -1})
    for q in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError):
            h.quantile(q)
    h.record(5, 0)
    assert h.count == 1
