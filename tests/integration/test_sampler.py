"""The timeline sampler on the real /proc: what a short run keeps."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pgdyno.collect.procfs import ProcReader, ProcSnapshot
from pgdyno.collect.sampler import FINAL_PART, TimelineSampler


class Watched(ProcReader):
    """The real /proc reader, telling when the sampler took its first snapshot."""

    def __init__(self) -> None:
        super().__init__(Path("/proc"))
        self.first = threading.Event()

    def snapshot(self) -> ProcSnapshot:
        found = super().snapshot()
        self.first.set()
        return found


def test_a_run_that_ends_between_whole_seconds_keeps_its_last_part_second() -> None:
    """The sampler snapshots on whole seconds; a run that ends 0.7 s after its first snapshot
    (a 2 s storage-set run on a busy host) used to keep no sample at all. The stop comes 0.7 s
    after the snapshot whenever it came, so the part second is over FINAL_PART however late
    a busy host made the snapshot."""
    source = Watched()
    sampler = TimelineSampler(log=lambda _: None, proc_root=Path("/proc"), os_source=source)
    sampler.start()
    assert source.first.wait(30), "the sampler took no snapshot in 30 s"
    seen = time.monotonic()
    assert FINAL_PART < 0.7
    time.sleep(0.7)
    samples = sampler.stop().samples
    assert time.monotonic() - seen >= 0.7
    assert len({t for t, *_ in samples}) >= 1
    assert {"cpu.user_pct", "sys.context_switches_per_s"} <= {name for _, name, _ in samples}


def test_pgbench_cpu_is_named_by_the_second_its_look_was_due_at() -> None:
    """A look 0.7 s late (a busy host) names its interval after the second it was due at, as
    the other samples of that interval are named: rounding its clock named it after the next
    second, whose own sample then collided with it in the store."""
    sampler = TimelineSampler(log=lambda _: None, proc_root=Path("/proc"))
    sampler._client_cpu((100.7, 101.0), 30, 100)
    sampler._client_cpu((101.0, 102.0), 30, 101)
    assert [(t, name) for t, name, _ in sampler.timeline.samples] == [
        (100, "client.cpu_pct"),
        (101, "client.cpu_pct"),
    ]
