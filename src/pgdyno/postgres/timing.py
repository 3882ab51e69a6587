"""What reading the clock costs on this host: `pg_test_timing`, which the PostgreSQL binaries ship.

`track_io_timing` reads the clock twice per I/O; on a host whose clock source is slow (a
virtual machine on a paravirtual or HPET clock) that costs throughput. PostgreSQL's own
answer is to measure it with pg_test_timing
(https://www.postgresql.org/docs/current/pgtesttiming.html), which `measure_clock` runs for
one second (`-d 1`). `parse_pg_test_timing` is pure and tested on the recorded output of
PostgreSQL 14 to 18 (tests/data/pg_test_timing/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pgdyno import process
from pgdyno.errors import BinariesError, ProcessError
from pgdyno.postgres.binaries import Binaries

_LOOP = re.compile(r"^(?:Per|Average) loop time including overhead:\s*([0-9.]+)\s*ns", re.M)
_BUCKET = re.compile(r"^\s*(\d+)\s+([0-9.]+)\s+(\d+)\s*$", re.M)
SECONDS = 1  # how long pg_test_timing measures


@dataclass(frozen=True, slots=True)
class ClockTiming:
    """pg_test_timing's result: the mean cost of one clock read (per loop, including the
    loop's own overhead) and the histogram of single durations (upper bound in microseconds,
    percent of all, count)."""

    per_loop_ns: float
    histogram: tuple[tuple[int, float, int], ...]

    @property
    def below_1us_percent(self) -> float:
        """The share of clock reads that took less than a microsecond."""
        return sum(percent for upper, percent, _ in self.histogram if upper <= 1)


def parse_pg_test_timing(text: str) -> ClockTiming:
    """pg_test_timing's output -> its figures; BinariesError when the text has no loop time.

    >>> timing = parse_pg_test_timing(
    ...     "Testing timing overhead for 1 second.\\n"
    ...     "Per loop time including overhead: 29.91 ns\\n"
    ...     "Histogram of timing durations:\\n"
    ...     "  < us   % of total      count\\n"
    ...     "     1     97.61946   32634540\\n"
    ...     "     2      2.37814     795022\\n")
    >>> timing.per_loop_ns, timing.histogram[1], round(timing.below_1us_percent, 2)
    (29.91, (2, 2.37814, 795022), 97.62)
    """
    loop = _LOOP.search(text)
    if loop is None:
        raise BinariesError(
            "pg_test_timing printed no loop time ("
            + (process.last_line(text) or "no output")
            + "): check the PostgreSQL binaries."
        )
    buckets = tuple(
        (int(upper), float(percent), int(count)) for upper, percent, count in _BUCKET.findall(text)
    )
    return ClockTiming(per_loop_ns=float(loop.group(1)), histogram=buckets)


def measure_clock(binaries: Binaries) -> ClockTiming:
    """Run pg_test_timing of these binaries for SECONDS and read its figures."""
    tool = binaries.tool("pg_test_timing")
    if not tool.is_file():
        raise BinariesError(f"{binaries.bin_dir} has no pg_test_timing: install PostgreSQL's "
                            "client programs, or give --pg-bin.")  # fmt: skip
    try:
        out = process.run([tool, "-d", str(SECONDS)], what="pg_test_timing", timeout=60)
    except ProcessError as exc:
        raise BinariesError(
            f"{tool} failed ({process.last_line(exc.stderr) or exc}): check the PostgreSQL "
            "binaries."
        ) from None
    return parse_pg_test_timing(out.stdout)
