"""Which period length makes switching inside one run cheapest on this host: the paired spread
of adjacent windows of one pgbench run, per design, and the machine time a verdict needs
(docs/statistics.md, "Switching inside one run").

    python benchmarks/period_length.py [--seconds 240] [--clients N] [--rate 0.02]

One select-only pgbench run (small scale, clients = CPUs, the per-transaction log sampled at
`--rate`, as pgdyno samples it at about 90,000 TPS) on a throwaway PostgreSQL 18 sandbox, with
no switch at all: an A/A in which any labelling of the periods is a valid one. Its seconds are
read by pgdyno's own reader (`pgbench.txlog.summarize`): each second's transactions counted
from pgbench's per-client transaction numbers, and, for comparison, the logged lines divided by
the rate (what the reader did before). Each design cuts the run into periods of P seconds, of
which the first D are dropped (the switch's second and any burn-in) and the rest measured;
consecutive periods pair into rounds, at every offset into the run. Printed per design: the
standard deviation of the rounds' log TPS ratios (the paired spread: the rounds a verdict
needs grow with its square) and the machine time per verdict relative to the old default
(5 s periods measuring 3 s: a switch landing inside a second, then a 1 s burn-in), which is
the spread squared times the round's 2P seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess

from harness_overhead import pgdyno_run
from throwaway import select_only, throwaway_sandbox

from pgdyno.pgbench.txlog import summarize

# (period P, seconds dropped at its start D): measured P - D
DESIGNS = ((5, 2), (5, 1), (4, 1), (3, 1), (2, 1))
OLD = (5, 2)
NAMES = {(5, 2): "the old default", (3, 1): "the default since 2026-11-29"}


def spread(per_second: list[float], period: int, dropped: int) -> tuple[float, int]:
    """The paired spread (log ratio, %) of adjacent periods' mean TPS, over every offset."""
    ratios = []
    for offset in range(period):
        means = [
            sum(per_second[s + dropped : s + period]) / (period - dropped)
            for s in range(offset, len(per_second) - period + 1, period)
        ]
        ratios += [math.log(means[i] / means[i + 1]) for i in range(0, len(means) - 1, 2)]
    return 100 * statistics.stdev(ratios), len(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=240)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rate", type=float, default=0.02)
    args = parser.parse_args()
    with throwaway_sandbox("pgdyno-period-length-") as (workdir, binaries, box):
        pgdyno_run(workdir, args.clients, 3, "auto")  # the dataset
        log_dir = workdir / "tx-logs"
        log_dir.mkdir()
        argv = select_only(
            binaries,
            box,
            args.clients,
            args.seconds,
            "-l",
            f"--log-prefix={log_dir / 'tx'}",
            f"--sampling-rate={args.rate}",
        )
        subprocess.run(argv, check=True, capture_output=True)
        rows, _ = summarize(sorted(log_dir.glob("tx.*")), args.rate)
    rows = rows[2:-2]  # the run's start and end
    counted = [float(r.transactions) for r in rows]
    scaled = [r.logged / args.rate for r in rows]
    mean = statistics.fmean(counted)
    logs = [math.log(x) for x in counted]
    centre = statistics.fmean(logs)
    variance = statistics.pvariance(logs)
    acf = [
        sum((logs[i] - centre) * (logs[i + lag] - centre) for i in range(len(logs) - lag))
        / len(logs) / variance
        for lag in (1, 5)
    ]  # fmt: skip
    print(f"select-only, {args.clients} clients, {len(rows)} s measured, {mean:,.0f} TPS, "
          f"log sampled at {args.rate}: per-second TPS sd {100 * math.sqrt(variance):.2f}%, "
          f"autocorrelation {acf[0]:.2f} at 1 s, {acf[1]:.2f} at 5 s")  # fmt: skip
    old_sd, _ = spread(counted, *OLD)
    for period, dropped in DESIGNS:
        exact, rounds = spread(counted, period, dropped)
        lines, _ = spread(scaled, period, dropped)
        cost = exact**2 * period / (old_sd**2 * OLD[0])
        name = f" ({NAMES[(period, dropped)]})" if (period, dropped) in NAMES else ""
        print(f"period_length: {period} s periods measuring {period - dropped} s{name}: paired "
              f"spread {exact:.2f}% counted ({lines:.2f}% from lines / rate), {rounds} rounds; "
              f"machine time per verdict {cost:.2f} of the old default's")  # fmt: skip


if __name__ == "__main__":
    main()
