"""The timeline sampler on the real /proc: what a short run keeps."""

from __future__ import annotations

import math
import time
from pathlib import Path

from pgdyno.collect.sampler import FINAL_PART, TimelineSampler


def sleep_until(at: float) -> None:
    time.sleep(max(0.0, at - time.time()))


def test_a_run_that_ends_between_whole_seconds_keeps_its_last_part_second() -> None:
    """The sampler snapshots on whole seconds; a run that ends 0.9 s after its first whole
    second (a 2 s storage-set run on a busy host) used to keep no sample at all."""
    sleep_until(math.floor(time.time()) + 1.1)  # start just after a whole second
    sampler = TimelineSampler(log=lambda _: None, proc_root=Path("/proc"))
    sampler.start()
    first = math.floor(time.time()) + 1.0  # the sampler's first snapshot
    assert FINAL_PART < 0.9
    sleep_until(first + 0.9)
    samples = sampler.stop().samples
    assert {t for t, *_ in samples} == {round(first)}
    assert {"cpu.user_pct", "sys.context_switches_per_s"} <= {name for _, name, _ in samples}
