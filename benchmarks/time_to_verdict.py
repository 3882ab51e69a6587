"""Time to a verdict: adaptive rounds against the seeds' fixed protocol, in one run.

    python benchmarks/time_to_verdict.py [--precision 2] [--budget 20m] [--run-seconds 5]
                                         [--warmup 2] [--fixed-seconds 300] [--clients N]

Both arms compare two sets of the same configuration (A vs B, select-only, small scale,
clients = CPUs, PostgreSQL 18) with `pgdyno compare` in a throwaway work directory, one after
the other:

* adaptive: short runs in rounds (`--run-seconds`, after `--warmup` seconds of warm-up) with
  `precision` and `budget`, until the TPS interval is at most +-precision % wide (always-valid,
  97.5%) or the budget ends;
* fixed: the protocol of seeds 000/002, 3 runs of `--fixed-seconds` (300) per set, judged by
  pgdyno's one-look paired interval (97.5%).

Printed: each arm's machine time (the rounds' own clock: warm-ups, runs, dataset copies and
restarts included) and the half-width of its TPS interval, and the ratio of machine times.
Target: the adaptive arm needs at most 1/5 of the fixed protocol's time for an interval at
least as narrow. `--fixed-seconds` below 300 shortens the fixed arm for a quick check; its
ratio then says nothing about the target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PLAN = """name = "{name}"
[matrix]
workloads = ["select-only"]
scales = ["small"]
clients = [{clients}]
duration = {seconds}
warmup = {warmup}
# rounds of runs (switching inside one run is benchmarks/switching.py)
design = "runs"
{rounds}
[[set]]
name = "a"
[[set]]
name = "b"
"""


def compare(workdir: Path, name: str, clients: int, seconds: int, rounds: str, warmup: int
            ) -> dict[str, Any]:  # fmt: skip
    plan = workdir / f"{name}.toml"
    plan.write_text(PLAN.format(name=name, clients=clients, seconds=seconds, rounds=rounds,
                                warmup=warmup))  # fmt: skip
    argv = [sys.executable, "-m", "pgdyno", "compare", str(plan), "--workdir", str(workdir),
            "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode not in (0,):
        sys.exit(f"pgdyno compare failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def arm(result: dict[str, Any]) -> tuple[float, float | None, str]:
    """Machine time, the TPS interval's half-width in points, and a description."""
    rounds = result["rounds"]
    change = next((r["tps_change"] for r in result["analysis"]["results"] if r["tps_change"]),
                  {"change_pct": float("nan"), "ci_low_pct": None, "ci_high_pct": None,
                   "method": "no usable pair: every run discarded"})  # fmt: skip
    low, high = change["ci_low_pct"], change["ci_high_pct"]
    half = (high - low) / 2 if low is not None and high is not None else None
    discarded = sum(r["discarded"] for r in result["analysis"]["results"])
    text = (
        f"{rounds['rounds']} rounds, {rounds['seconds'] / 60:.1f} min, stopped: "
        f"{rounds['stopped']}; change {change['change_pct']:+.2f}% "
        f"[{low if low is None else f'{low:+.2f}'}, {high if high is None else f'{high:+.2f}'}] "
        f"({change['method']}), {discarded} runs discarded for interference"
    )
    return float(rounds["seconds"]), half, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", type=float, default=2.0)
    parser.add_argument("--budget", default="20m")
    parser.add_argument("--run-seconds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--fixed-seconds", type=int, default=300)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-ttv-", dir="/tmp"))
    workdir.chmod(0o755)  # the sandbox user must reach it
    try:
        adaptive = compare(
            workdir, "adaptive", args.clients, args.run_seconds,
            f'precision = {args.precision}\nbudget = "{args.budget}"', warmup=args.warmup,
        )  # fmt: skip
        a_time, a_half, a_text = arm(adaptive)
        print(
            f"adaptive (precision {args.precision}%, budget {args.budget}, "
            f"{args.warmup} s + {args.run_seconds} s runs): {a_text}"
        )
        fixed = compare(workdir, "fixed", args.clients, args.fixed_seconds, "repeats = 3", 0)
        f_time, f_half, f_text = arm(fixed)
        print(f"fixed (3 x {args.fixed_seconds} s per set): {f_text}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"time_to_verdict: adaptive/fixed machine time {a_time / f_time:.3f} "
        f"({a_time:.0f} s vs {f_time:.0f} s; target <= 0.200); interval half-width "
        f"{a_half if a_half is None else f'{a_half:.2f}'} vs "
        f"{f_half if f_half is None else f'{f_half:.2f}'} points (target: adaptive <= fixed)"
    )


if __name__ == "__main__":
    main()
