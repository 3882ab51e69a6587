"""Harness overhead: TPS of `pgdyno bench` (default collection: OS and PostgreSQL samplers,
-P 1, -r, sampled latency log) against bare pgbench with the same workload and no logging.

    python benchmarks/harness_overhead.py [--pairs 5] [--seconds 10]

Select-only at the small scale with clients = CPUs, on one sandbox; pairs are interleaved and
alternate their order so drift on a shared machine hits both sides alike. Prints the median
of the per-pair TPS ratios (target >= 0.97), then the same with full per-transaction logging.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from throwaway import throwaway_sandbox

from pgdyno.pgbench.dataset import BENCH_DB
from pgdyno.pgbench.output import parse_summary


def pgdyno_tps(workdir: Path, clients: int, seconds: int, latency_log: str) -> float:
    argv = [
        sys.executable, "-m", "pgdyno", "bench", "--workdir", str(workdir), "--pg-version", "18",
        "-w", "select-only", "-s", "small", "-c", str(clients), "-T", str(seconds),
        "--latency-log", latency_log, "--json",
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return float(json.loads(out)[0]["tps"])


def bare_tps(pgbench: Path, dsn: str, clients: int, seconds: int) -> float:
    argv = [str(pgbench), "-n", "-b", "select-only", "-c", str(clients), "-j", str(clients),
            "-T", str(seconds), "-M", "simple", dsn]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return parse_summary(out).tps


def pairs(args: argparse.Namespace, workdir: Path, pgbench: Path, dsn: str, mode: str) -> float:
    ratios = []
    for i in range(args.pairs):
        if i % 2 == 0:
            tool = pgdyno_tps(workdir, args.clients, args.seconds, mode)
            bare = bare_tps(pgbench, dsn, args.clients, args.seconds)
        else:
            bare = bare_tps(pgbench, dsn, args.clients, args.seconds)
            tool = pgdyno_tps(workdir, args.clients, args.seconds, mode)
        ratios.append(tool / bare)
        print(f"  pair {i + 1}: pgdyno {tool:,.0f} TPS, bare pgbench {bare:,.0f} TPS, "
              f"ratio {tool / bare:.3f}")  # fmt: skip
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    with throwaway_sandbox("pgdyno-overhead-") as (workdir, binaries, box):
        dsn = box.conninfo(BENCH_DB)
        pgbench = binaries.tool("pgbench")
        # Untimed: builds the dataset and gives pgdyno a TPS to size its latency sample from.
        pgdyno_tps(workdir, args.clients, 3, "auto")
        print(f"select-only, small scale, {args.clients} clients, {args.seconds} s runs")
        print("default collection:")
        default = pairs(args, workdir, pgbench, dsn, "auto")
        print("full per-transaction logging:")
        full = pairs(args, workdir, pgbench, dsn, "full")
        print(f"harness_overhead: pgdyno/bare pgbench TPS ratio {default:.3f} with default "
              f"collection (target >= 0.97), {full:.3f} with full per-transaction logging "
              f"(median of {args.pairs} interleaved pairs each)")  # fmt: skip


if __name__ == "__main__":
    main()
