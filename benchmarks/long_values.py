"""Printing a long user value: pgdyno's console against Rich's own, in the same run.

    python benchmarks/long_values.py [--kb 4 8 16 32] [--repeats 3]

A user's value can be any length (a 64 KB connection string took 26 s to print, issue 31). Rich's
highlighter runs regular expressions whose time grows with the square of a word's length;
pgdyno's console (cli/common.py `SafeConsole`) cuts a word longer than textsafe.LONGEST_WORD in
its middle before Rich sees it. For each size this prints the median time of a Rich console as
pgdyno configures it but without the cut (the baseline, measured here), of pgdyno's console, and
their ratio (baseline / pgdyno). Sizes above 32 KB make the baseline slow: it is quadratic.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable

from rich.console import Console

from pgdyno.cli.common import SafeConsole

FIELDS = "host=/var/run/postgresql port=5432 dbname="


def timed(make: Callable[[io.StringIO], Console], text: str, repeats: int) -> float:
    """Median seconds to print `text` once on a console writing to memory."""
    seconds = []
    for _ in range(repeats):
        console = make(io.StringIO())
        started = time.perf_counter()
        console.print(text, soft_wrap=True)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    timed(lambda f: SafeConsole(file=f), "warm-up: Rich loads its highlighter once", 1)
    print(f"{'value':>8}  {'rich (s)':>9}  {'pgdyno (s)':>10}  ratio")
    for kb in args.kb:
        text = FIELDS + "x" * (kb * 1024)
        rich = timed(lambda f: Console(file=f, markup=False, emoji=False), text, args.repeats)
        ours = timed(lambda f: SafeConsole(file=f), text, args.repeats)
        print(f"{kb:>5} KB  {rich:>9.3f}  {ours:>10.4f}  {rich / ours:,.0f}x")


if __name__ == "__main__":
    main()
