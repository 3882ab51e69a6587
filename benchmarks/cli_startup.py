"""CLI start-up: how long `pgdyno rollback --help` takes to start and exit, against the same
process importing every command up front (as pgdyno did before its commands were loaded lazily).

    python benchmarks/cli_startup.py [--runs 20]

Both sides are fresh Python processes, run alternately so the machine's load falls on both.
Prints the median of each and the ratio lazy / eager (target: <= 0.6). `pgdyno rollback` is the
command a user types after an interruption, and the one the crash-point tests start after every
point, so its start-up is paid many times. Times are wall-clock on a shared machine: read the
ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

LAZY = "from pgdyno.cli import run; run()"
EAGER = "from pgdyno.cli.app import commands; commands(); from pgdyno.cli import run; run()"


def once(code: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code, "rollback", "--help"],
        check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    once(LAZY), once(EAGER)  # warm the page cache for both
    lazy, eager = [], []
    for _ in range(args.runs):
        lazy.append(once(LAZY))
        eager.append(once(EAGER))
    lazy_s, eager_s = statistics.median(lazy), statistics.median(eager)
    print(f"pgdyno rollback --help, median of {args.runs}: lazy {lazy_s * 1000:.0f} ms, "
          f"every command imported {eager_s * 1000:.0f} ms")  # fmt: skip
    print(f"ratio lazy / eager: {lazy_s / eager_s:.2f} (target <= 0.6)")


if __name__ == "__main__":
    main()
