"""A short neutral probe of the host's speed: a fixed single-thread CPU loop and a fixed memory
copy, timed in a child process of their own, each in operations a second.

What it is for (issue 33, "Covariates"): a figure that no configuration set can change, taken
when nothing of the experiment runs, that moves with what slows the whole host (another
tenant's memory traffic, a CPU clocked down, steal), as a candidate covariate for the
regression adjustment of `pgdyno.stats.covariates` (Lindon, Ham, Tingley and Bojinov 2022,
"Anytime-valid linear models and regression adjustment for experimental data",
arXiv:2210.08589). Where it may serve, and where it may not, is in docs/statistics.md,
"Covariates": its noise on a host is measured by `benchmarks/probe_noise.py`.

The child is a fresh interpreter (`python -m pgdyno.host.probe`), so the probe never waits on
pgdyno's own threads (the timeline sampler, a pgbench reader) for the interpreter lock, and
prints one JSON object.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from pgdyno.errors import ParseError
from pgdyno.process import run

CPU_STEPS: Final = 300_000  # steps of the integer loop (tens of milliseconds)
MEMORY_BYTES: Final = 32 * 1024**2  # the buffer copied (beyond the last-level caches)
MEMORY_COPIES: Final = 8
PROBE_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe: the CPU loop's steps a second and the bytes a second the copies moved."""

    cpu_ops_s: float
    memory_bytes_s: float

    def as_dict(self) -> dict[str, float]:
        """
        >>> Probe(1.5e7, 4.0e9).as_dict()
        {'cpu_ops_s': 15000000.0, 'memory_bytes_s': 4000000000.0}
        """
        return {"cpu_ops_s": self.cpu_ops_s, "memory_bytes_s": self.memory_bytes_s}


def cpu_loop(steps: int) -> int:
    """A fixed amount of single-thread work with a result that depends on every step (a linear
    congruential generator, Knuth's MMIX constants), so no step can be skipped.

    >>> cpu_loop(3)
    11960119808228829710
    """
    x = 1
    for _ in range(steps):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
    return x


def memory_loop(size: int, copies: int) -> int:
    """`copies` copies of a `size`-byte buffer into another; the bytes moved (read + written).

    >>> memory_loop(1024, 2)
    4096
    """
    source = np.ones(size, dtype=np.uint8)
    target = np.empty_like(source)
    for _ in range(copies):
        np.copyto(target, source)
    return 2 * size * copies


def measure(steps: int = CPU_STEPS, size: int = MEMORY_BYTES, copies: int = MEMORY_COPIES) -> Probe:
    """Both loops timed here (the child's work)."""
    start = time.perf_counter()
    cpu_loop(steps)
    cpu_s = time.perf_counter() - start
    memory_loop(size, 1)  # the pages touched once, before the timing
    start = time.perf_counter()
    moved = memory_loop(size, copies)
    memory_s = time.perf_counter() - start
    return Probe(steps / cpu_s, moved / memory_s)


def parse_probe(text: str) -> Probe:
    """The child's JSON line as a probe; one sentence when it is not one.

    >>> parse_probe('{"cpu_ops_s": 2.0e7, "memory_bytes_s": 5.0e9}')
    Probe(cpu_ops_s=20000000.0, memory_bytes_s=5000000000.0)
    >>> parse_probe("oops")
    Traceback (most recent call last):
    ...
    pgdyno.errors.ParseError: the host probe printed 'oops', not its two figures.
    """
    try:
        found = json.loads(text)
        probe = Probe(float(found["cpu_ops_s"]), float(found["memory_bytes_s"]))
    except (ValueError, KeyError, TypeError):
        probe = Probe(0.0, 0.0)
    if not (probe.cpu_ops_s > 0 and probe.memory_bytes_s > 0):
        raise ParseError(f"the host probe printed {text.strip()[:80]!r}, not its two figures.")
    return probe


def probe(python: str = sys.executable) -> Probe:
    """One probe in a child interpreter of its own."""
    done = run([python, "-m", "pgdyno.host.probe"], what="the host probe",
               timeout=PROBE_TIMEOUT_S)  # fmt: skip
    return parse_probe(done.stdout)


@dataclass(frozen=True, slots=True)
class Spread:
    """How much probes of one figure vary: their median and the robust coefficient of
    variation of their logs (1.4826 MAD, so about the standard deviation for normal noise)."""

    median: float
    cv: float
    count: int


def spread(values: Sequence[float]) -> Spread:
    """
    >>> s = spread([100.0, 101.0, 99.0, 100.0, 150.0])
    >>> round(s.median, 6), round(s.cv, 4), s.count
    (100.0, 0.0148, 5)
    """
    logs = [math.log(v) for v in values]
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    return Spread(math.exp(centre), 1.4826 * mad, len(values))


if __name__ == "__main__":
    print(json.dumps(measure().as_dict()))
