"""The timeline sampler's tick plan (collect/sampler.py: `next_planned`, `whole_tick`) when
every wait look takes longer than a tick's step, as on a loaded host: the planning is driven
exactly as the sampler's loop drives it, with the looks' durations given."""

from __future__ import annotations

import math

import pytest

from pgdyno.collect.sampler import next_planned, whole_tick

STEP, INTERVAL = 0.1, 1.0  # waits at 10 Hz, snapshots once a second


def snapshots(start: float, end: float, look_s: float) -> list[int]:
    """The intervals whose snapshot the loop takes between `start` and `end` when each wait look
    takes `look_s` and a snapshot look 0.05 s."""
    last = math.floor(start / INTERVAL + 1e-9)  # as the loop starts
    now, taken = start, []
    while True:
        planned = next_planned(now, STEP)
        tick = max(planned, now)
        if tick >= end:
            return taken
        due = whole_tick(planned, tick, (STEP, INTERVAL), last)
        if due is None:
            now = tick + look_s
            continue
        taken.append(due)
        last = due
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
