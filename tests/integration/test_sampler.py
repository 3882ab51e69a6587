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
