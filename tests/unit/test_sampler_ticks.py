"""The timeline sampler's tick plan (collect/sampler.py: `TickPlan`, which its loop uses) when
every wait look takes longer than a tick's step, as on a loaded host: the plan is driven as
the loop drives it, with the looks' durations given instead of the clock."""

from __future__ import annotations

import math

import pytest

from pgdyno.collect.sampler import TickPlan

STEP, INTERVAL = 0.1, 1.0  # waits at 10 Hz, snapshots once a second


def snapshots(start: float, end: float, look_s: float) -> list[int]:
    """The intervals whose snapshot the loop takes between `start` and `end` when each wait look
    takes `look_s` and a snapshot look 0.05 s."""
    plan = TickPlan(start, STEP, INTERVAL)
    now, taken = start, []
    while True:
        planned = plan.next(now)
        tick = max(planned, now)
        if tick >= end:
            return taken
        due = plan.due(planned, tick)
        if due is None:
            now = tick + look_s
            continue
        taken.append(due)
        now = tick + 0.05 + look_s


@pytest.mark.parametrize("look_s", [0.001, 0.099, 0.15, 0.35, 0.9])
@pytest.mark.parametrize("start", [10.0, 10.05, 10.3, 10.97])
def test_every_second_of_a_short_run_gets_its_snapshot_however_slow_the_looks(
    start: float, look_s: float
) -> None:
    # A 3 s step of a capacity sweep: whatever the looks cost, each whole second after the start
    # has its snapshot, once, in order (a look slower than the step used to plan every tick past
    # the first boundaries, and the run had no sample at all).
    taken = snapshots(start, start + 3.0, look_s)
    first = math.floor(start) + 1
    assert taken == list(range(first, first + len(taken)))
    assert len(taken) >= 2  # two snapshots: at least one sample
