"""Switching inside one run: a reload-only A/A to +-2% against the fixed protocol's machine time.

    python benchmarks/switching.py [--precision 2] [--budget 20m] [--period 3] [--burn-in 0.5]
                                   [--fixed-seconds 300] [--run-fixed] [--clients N] [--hog]

Two sets that differ only by a setting a reload makes current and that changes nothing
measurable (log_min_duration_statement -1 against 100 s: no statement is that slow), select-only,
small scale, clients = CPUs, PostgreSQL 18, compared with `pgdyno compare` in a throwaway work
directory by switching inside one pgbench run (`design = "inside"`), until the TPS interval is
at most +-precision % wide (always-valid, 97.5%) or the budget ends.

The fixed protocol of seeds 000/002 is 3 runs of `--fixed-seconds` (300) per set: its machine
time is 2 x 3 x (300 s + 3 s of dataset copy and connections, pgdyno's RUN_OVERHEAD_S), which is
what `--run-fixed` measures too (about 31 minutes; time_to_verdict.py runs it). Without
`--run-fixed` the ratio uses that figure.

`--hog` runs the comparison beside a process that takes half a CPU (busy 50 ms, asleep 50 ms,
in turn), started before it and killed after: the issue's A/A beside a CPU hog, whose periods
are kept and adjusted for the foreign CPU rather than discarded (target: a verdict within 3
times the quiet host's time).

Printed: the switching arm's machine time (the whole `pgdyno compare` command, wall clock:
sandbox start, dataset, rate probe and pgbench's start included), its rounds, its interval and
verdict, and the ratio to the fixed protocol's time. Target (issue 33): at most 0.1.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pgdyno.plan.model import DEFAULT_BURN_IN_S, DEFAULT_PERIOD_S

HOG = (
    "import time\n"
    "while True:\n"
    "    end = time.monotonic() + 0.05\n"
    "    while time.monotonic() < end:\n"
    "        pass\n"
    "    time.sleep(0.05)\n"
)
RUN_OVERHEAD_S = 3.0  # pgdyno.experiment.matrix.RUN_OVERHEAD_S

PLAN = """name = "{name}"
[matrix]
workloads = ["select-only"]
scales = ["small"]
clients = [{clients}]
warmup = {warmup}
{rounds}
[[set]]
name = "a"
[set.pg]
log_min_duration_statement = -1
[[set]]
name = "b"
[set.pg]
log_min_duration_statement = 100000
"""


def compare(workdir: Path, name: str, clients: int, rounds: str, warmup: int
            ) -> tuple[dict[str, Any], float]:  # fmt: skip
    """The comparison's JSON and the command's wall time in seconds."""
    plan = workdir / f"{name}.toml"
    plan.write_text(PLAN.format(name=name, clients=clients, rounds=rounds, warmup=warmup))
    argv = [sys.executable, "-m", "pgdyno", "compare", str(plan), "--workdir", str(workdir),
            "--json"]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"pgdyno compare failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result, took


def describe(result: dict[str, Any], took: float) -> str:
    rounds = result["rounds"]
    change = next((r["tps_change"] for r in result["analysis"]["results"] if r["tps_change"]),
                  None)  # fmt: skip
    discarded = sum(r["discarded"] for r in result["analysis"]["results"])
    if change is None:
        found = "no usable pair (every period discarded)"
    else:
        found = (
            f"change {change['change_pct']:+.2f}% [{change['ci_low_pct']:+.2f}, "
            f"{change['ci_high_pct']:+.2f}] ({change['method']}, {change['verdict']})"
        )
    return (
        f"{rounds['design']}: {rounds['rounds']} rounds in {rounds['seconds']:.0f} s "
        f"({took:.0f} s for the whole command), stopped: {rounds['stopped']}; {found}; "
        f"{discarded} periods discarded for interference; {paired_spread(result)}"
    )


def paired_spread(result: dict[str, Any]) -> str:
    """The standard deviation of the rounds' log TPS ratios b/a (what the rounds needed grow
    with, as its square), and the machine seconds a round took."""
    by_round: dict[int, dict[str, float]] = {}
    for run in result["runs"]:
        if run["status"] == "ok" and run["tps"]:
            by_round.setdefault(run["repeat"], {})[run["set_name"]] = run["tps"]
    ratios = [math.log(r["b"] / r["a"]) for r in by_round.values() if {"a", "b"} <= r.keys()]
    if len(ratios) < 2:
        return "paired spread: too few rounds"
    per_round = result["rounds"]["seconds"] / max(result["rounds"]["rounds"], 1)
    return (
        f"paired spread {100 * statistics.stdev(ratios):.2f}% over {len(ratios)} rounds "
        f"of {per_round:.1f} s"
    )


def switch_gaps(workdir: Path, comparison_id: int) -> str:
    """From each period's `switching_period` event (in the results store: compare's JSON does
    not carry events): the time from a period's end to the next switch taking effect, inside a
    round (the reload) and across rounds (the look, then the reload), and the whole seconds
    measured per period."""
    with sqlite3.connect(workdir / "results.sqlite") as db:
        rows = db.execute(
            "SELECT e.detail FROM run_events e JOIN runs r ON r.id = e.run_id"
            " WHERE e.kind = 'switching_period' AND r.comparison_id = ?",
            (comparison_id,),
        ).fetchall()
    periods = sorted((json.loads(detail) for (detail,) in rows), key=lambda d: d["period"])
    inside, across = [], []
    for before, after in itertools.pairwise(periods):
        gap = after["switched_at"] - before["ended_at"]
        (inside if after["round"] == before["round"] else across).append(gap)
    measured = [d["last_second"] - d["first_second"] + 1 for d in periods]
    if not inside or not across:
        return "switch gaps: too few periods"
    return (
        f"switch took effect {statistics.median(inside):.2f} s after a period's end inside a "
        f"round, {statistics.median(across):.2f} s across rounds (max "
        f"{max(across):.2f}: the look); measured seconds a period: median "
        f"{statistics.median(measured):g}, min {min(measured)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", type=float, default=2.0)
    parser.add_argument("--budget", default="20m")
    parser.add_argument("--period", type=int, default=DEFAULT_PERIOD_S)
    parser.add_argument("--burn-in", type=float, default=DEFAULT_BURN_IN_S)
    parser.add_argument("--fixed-seconds", type=int, default=300)
    parser.add_argument("--run-fixed", action="store_true")
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--hog", action="store_true", help="beside a process taking half a CPU")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-switching-", dir="/tmp"))
    workdir.chmod(0o755)  # the sandbox user must reach it
    hog = subprocess.Popen([sys.executable, "-c", HOG]) if args.hog else None
    try:
        inside = (
            f'design = "inside"\nperiod = {args.period}\nburn_in = {args.burn_in}\n'
            f'precision = {args.precision}\nbudget = "{args.budget}"'
        )
        result, took = compare(workdir, "switching", args.clients, inside, 0)
        print(f"switching inside one run: {describe(result, took)}")
        print(f"  {switch_gaps(workdir, result['comparison']['id'])}")
        fixed_s = 2 * 3 * (args.fixed_seconds + RUN_OVERHEAD_S)
        if args.run_fixed:
            fixed, fixed_took = compare(workdir, "fixed", args.clients,
                                        f'design = "runs"\nrepeats = 3\nduration = '
                                        f"{args.fixed_seconds}", 0)  # fmt: skip
            print(f"fixed protocol: {describe(fixed, fixed_took)}")
            fixed_s = fixed_took
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    how = "measured" if args.run_fixed else "2 x 3 x (run + 3 s)"
    print(
        f"switching: machine time {took / fixed_s:.3f} of the fixed protocol "
        f"({took:.0f} s vs {fixed_s:.0f} s, {how}; target <= 0.100)"
    )


if __name__ == "__main__":
    main()
