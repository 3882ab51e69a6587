"""Harness overhead: TPS of `pgdyno bench` (default collection: OS and PostgreSQL samplers,
a latency log sampled to about 2,000 transactions a second, the on-CPU profile where perf can
sample, wait events at 10 Hz) against bare pgbench with the same
workload and no logging; and pgdyno bench with its wait-event sampling (10 looks a second at
pg_stat_activity) against the same with it off (--wait-sample-hz 0); and pgdyno bench with
its on-CPU profile (--cpu-profile: perf at 49 Hz on the server's processes) against
--no-cpu-profile.

    python benchmarks/harness_overhead.py [--pairs 12] [--seconds 10] [--waits-only]
    python benchmarks/harness_overhead.py --profile-only [--pairs 12] [--seconds 10]
    python benchmarks/harness_overhead.py --wait-rates 10,4,0 [--pairs 12] [--seconds 10]

Select-only at the small scale with clients = CPUs, on one sandbox. Each round runs three
arms: bare pgbench; the exact pgbench command pgdyno ran last (its -l --sampling-rate options,
without pgdyno around it); and pgdyno bench. So the output splits the overhead into what
pgbench's own instrumentation costs and what pgdyno's process and samplers cost. Rounds cycle
through the six orders of the arms: over a multiple of 6 rounds every arm runs equally often
in each position and right after each other arm (with two alternating orders, the command arm
was always in the middle and only ever followed bare or pgdyno). Ratios are summarised as the
geometric mean of the per-round ratios with its 95% confidence interval, and the median
(target: pgdyno/bare >= 0.99 with the whole interval above 0.98). Then pgdyno with full
per-transaction logging against bare. On a shared VM single runs swing by +-20%, so a 1%
effect needs a dozen rounds or more to be told from noise; benchmarks/harness_cost.py
measures the CPU each part of the harness takes, which noise barely moves.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ratios import summarise
from throwaway import select_only, throwaway_sandbox

from pgdyno.collect.waits import DEFAULT_HZ
from pgdyno.host.perf import DEFAULT_HZ as PERF_HZ
from pgdyno.pgbench.output import parse_summary

# Every order of the three arms: each arm in each position, and right after each other arm,
# twice per cycle of six rounds.
ORDERS = list(itertools.permutations(("bare", "command", "pgdyno")))


def pgdyno_run(
    workdir: Path,
    clients: int,
    seconds: int,
    latency_log: str,
    wait_hz: int = DEFAULT_HZ,
    cpu_profile: bool | None = None,  # None: pgdyno's default (on where perf can sample)
) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "pgdyno", "bench", "--workdir", str(workdir), "--pg-version", "18",
        "-w", "select-only", "-s", "small", "-c", str(clients), "-T", str(seconds),
        "--latency-log", latency_log, "--wait-sample-hz", str(wait_hz), "--json",
        *([] if cpu_profile is None else ["--cpu-profile" if cpu_profile else "--no-cpu-profile"]),
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    run: dict[str, Any] = json.loads(out)[0]
    return run


def bare_tps(argv: list[str]) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return parse_summary(out).tps


def same_command(argv: list[str], log_dir: Path) -> list[str]:
    """pgdyno's pgbench command with its transaction log sent to `log_dir`."""
    return [f"--log-prefix={log_dir / 'tx'}" if a.startswith("--log-prefix=") else a for a in argv]


def rounds(
    args: argparse.Namespace, workdir: Path, bare: list[str], mode: str, log_dir: Path
) -> tuple[list[float], list[float]]:
    """Per round: pgdyno/bare and pgdyno's own pgbench command/bare TPS ratios."""
    tool_ratios, command_ratios = [], []
    # The command of pgdyno's latest run: its sampling rate is sized from the run before.
    last = pgdyno_run(workdir, args.clients, 3, mode)
    for i in range(args.pairs):
        command = same_command(last["pgbench_argv"], log_dir)

        def tool() -> float:
            nonlocal last
            last = pgdyno_run(workdir, args.clients, args.seconds, mode)
            return float(last["tps"])

        arms = {
            "bare": lambda: bare_tps(bare),
            "command": lambda command=command: bare_tps(command),
            "pgdyno": tool,
        }
        order = ORDERS[i % len(ORDERS)]
        tps = {name: arms[name]() for name in order}
        for path in log_dir.glob("tx*"):
            path.unlink()
        tool_ratios.append(tps["pgdyno"] / tps["bare"])
        command_ratios.append(tps["command"] / tps["bare"])
        print(f"  round {i + 1} ({', '.join(order)}): bare {tps['bare']:,.0f}, same command "
              f"{tps['command']:,.0f}, pgdyno {tps['pgdyno']:,.0f} TPS")  # fmt: skip
    return tool_ratios, command_ratios


def wait_rounds(args: argparse.Namespace, workdir: Path) -> list[float]:
    """Per round: TPS of pgdyno bench with wait sampling at DEFAULT_HZ / with it off, the two
    runs in alternating order."""
    ratios = []
    for i in range(args.pairs):
        order = (DEFAULT_HZ, 0) if i % 2 == 0 else (0, DEFAULT_HZ)
        tps = {hz: float(pgdyno_run(workdir, args.clients, args.seconds, "auto", hz)["tps"])
               for hz in order}  # fmt: skip
        ratios.append(tps[DEFAULT_HZ] / tps[0])
        print(f"  round {i + 1}: waits at {DEFAULT_HZ} Hz {tps[DEFAULT_HZ]:,.0f}, off "
              f"{tps[0]:,.0f} TPS")  # fmt: skip
    return ratios


def profile_rounds(args: argparse.Namespace, workdir: Path) -> list[float]:
    """Per round: TPS of pgdyno bench with its CPU profile / without, the two runs in
    alternating order."""
    ratios = []
    for i in range(args.pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        tps = {on: float(pgdyno_run(workdir, args.clients, args.seconds, "auto",
                                    cpu_profile=on)["tps"])
               for on in order}  # fmt: skip
        ratios.append(tps[True] / tps[False])
        print(f"  round {i + 1}: CPU profile {tps[True]:,.0f}, without {tps[False]:,.0f} TPS")
    return ratios


def rate_rounds(
    args: argparse.Namespace, workdir: Path, bare: list[str], rates: list[int]
) -> dict[int, list[float]]:
    """Per round: pgdyno bench at each wait-sampling rate / bare pgbench, the arms in every
    order in turn (each in each position, and after each other, alike over the cycle)."""
    arms: list[int | None] = [None, *rates]  # None: bare pgbench
    orders = list(itertools.permutations(arms))
    ratios: dict[int, list[float]] = {hz: [] for hz in rates}
    for i in range(args.pairs):
        tps = {}
        for arm in orders[i % len(orders)]:
            tps[arm] = (
                bare_tps(bare)
                if arm is None
                else float(pgdyno_run(workdir, args.clients, args.seconds, "auto", arm)["tps"])
            )
        for hz in rates:
            ratios[hz].append(tps[hz] / tps[None])
        print(f"  round {i + 1}: bare {tps[None]:,.0f}, "
              + ", ".join(f"{hz} Hz {tps[hz]:,.0f}" for hz in rates) + " TPS")  # fmt: skip
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pairs", type=int, default=12, help="rounds per collection mode (best a multiple of 6)"
    )
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument(
        "--waits-only", action="store_true", help="only the wait-sampling arm (on against off)"
    )
    parser.add_argument(
        "--profile-only", action="store_true",
        help="only the CPU-profile arm (--cpu-profile against without)",
    )  # fmt: skip
    parser.add_argument(
        "--wait-rates", metavar="HZ,HZ,...",
        help="only bare pgbench against pgdyno bench at each of these wait-sampling rates "
        "(default collection otherwise), the arms in every order in turn",
    )  # fmt: skip
    args = parser.parse_args()
    with throwaway_sandbox("pgdyno-overhead-") as (workdir, binaries, box):
        bare = select_only(binaries, box, args.clients, args.seconds)
        log_dir = workdir / "bare-logs"
        log_dir.mkdir(mode=0o777)
        log_dir.chmod(0o777)
        print(f"select-only, small scale, {args.clients} clients, {args.seconds} s runs")
        pgdyno_run(workdir, args.clients, 3, "auto")  # the dataset, and the log's sample size
        if args.wait_rates:
            rates = [int(hz) for hz in args.wait_rates.split(",")]
            found = rate_rounds(args, workdir, bare, rates)
            for hz in rates:
                print(f"harness_overhead: pgdyno (waits at {hz} Hz) / bare pgbench TPS ratio "
                      f"{summarise(found[hz])} ({args.pairs} rounds)")  # fmt: skip
            return
        if not args.waits_only:
            print(f"CPU profile (perf at {PERF_HZ} Hz) against without (pgdyno bench both):")
            profiled = profile_rounds(args, workdir)
            print(f"harness_overhead: CPU profile / without, pgdyno bench TPS ratio "
                  f"{summarise(profiled)} (target >= 0.99; {args.pairs} rounds)")  # fmt: skip
            if args.profile_only:
                return
        print(f"wait sampling at {DEFAULT_HZ} Hz against off (pgdyno bench both):")
        waits = wait_rounds(args, workdir)
        print(f"harness_overhead: wait sampling at {DEFAULT_HZ} Hz / off, pgdyno bench TPS ratio "
              f"{summarise(waits)} (target >= 0.99; {args.pairs} rounds)")  # fmt: skip
        if args.waits_only:
            return
        print("default collection:")
        tool, command = rounds(args, workdir, bare, "auto", log_dir)
        print("full per-transaction logging:")
        full, full_command = rounds(args, workdir, bare, "full", log_dir)
        print(f"harness_overhead: pgdyno/bare pgbench TPS ratio {summarise(tool)} with default "
              f"collection (target >= 0.99, interval above 0.98)")  # fmt: skip
        print(f"  of which pgbench's own instrumentation (pgdyno's command run bare / bare): "
              f"{summarise(command)}; pgdyno's process and samplers: "
              f"{summarise([t / c for t, c in zip(tool, command, strict=True)])}")  # fmt: skip
        print(f"  full per-transaction logging: pgdyno/bare {summarise(full)}; the same "
              f"pgbench command run bare: {summarise(full_command)}")  # fmt: skip
        print(f"  ({args.pairs} rounds each)")


if __name__ == "__main__":
    main()
