"""Tuning gain: pgdyno's configuration against pgtune's for the same machine, in one run.

    python benchmarks/tuning_gain.py [--workdir DIR] [--scale medium] [--profile oltp]
                                     [--clients N] [--duration 60] [--precision 3] [--budget 60m]
                                     [--tpcc [--warehouses 8]]

1. A sandbox (PostgreSQL 18) gets the dataset first (`pgdyno bench` at `--scale`), so that the
   server the configurations are computed for holds the data they will serve.
2. `pgdyno tune --sandbox --json` gives pgdyno's configuration (every layer it applies: PostgreSQL,
   sysctls, transparent huge pages, the data disk's queue), `pgdyno tune --sandbox --baseline
   pgtune --json` pgtune's for the same facts (the values this server refuses left out).
3. One `pgdyno compare` of the two, pgtune's as the baseline, interleaved in rounds (A B, B A, ...)
   with adaptive, always-valid paired intervals, select-only and tpcb-like, pg_prewarm before each
   run so neither configuration starts cold.

Printed per workload: TPS of pgdyno's configuration over pgtune's, as a ratio with its interval,
and the p99 change. Target (issue 14): at least +5% on one workload and never worse beyond noise
on the other. Host settings are restored by `pgdyno compare` when it ends, whatever the outcome.

With `--tpcc` (issue 21) the workload is the TPC-C-like one at `--warehouses` (8: about 800 MB,
well above the default shared_buffers of 128 MB) and a third set runs the server's defaults;
the plan's baseline is the defaults, and the three pairs (pgdyno/pgtune, pgdyno/defaults,
pgtune/defaults) are judged on NOPM from the same rounds with the always-valid paired interval,
5% split over the three. Goal: pgdyno >= +5% over pgtune and a resolved gain over the defaults.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import tomli_w

from pgdyno.stats.paired import compare_rounds
from pgdyno.stats.sequential import MIXTURE_G, mixture_for_rounds


def pgdyno(workdir: Path, *args: str) -> str:
    argv = [sys.executable, "-m", "pgdyno", *args, "--workdir", str(workdir)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"pgdyno {args[0]} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    return done.stdout


def ours_set(config: dict[str, Any]) -> dict[str, Any]:
    """pgdyno's settings (status apply) as a plan set; block settings of the data disk only."""
    devices = config["facts"].get("devices") or {}
    data_disk = next((d for d, v in devices.items() if v.get("role") == "data"), None)
    table: dict[str, Any] = {"name": "pgdyno", "pg": {}, "sysctl": {}, "thp": {}, "block": {}}
    for s in config["settings"]:
        if s["status"] != "apply":
            continue
        value = s["recommended"]
        if s["layer"] == "postgresql":
            table["pg"][s["name"]] = value
        elif s["name"].startswith("transparent_hugepage/"):
            table["thp"][s["name"].partition("/")[2]] = value
        elif s["layer"] == "host":
            table["sysctl"][s["name"]] = int(value)
        elif s["device"] == data_disk:
            table["block"][s["name"]] = int(value) if value.isdigit() else value
    return {k: v for k, v in table.items() if v}


def pgtune_set(baseline: dict[str, Any]) -> dict[str, Any]:
    left_out = baseline.get("left_out") or {}
    pg = {k: v for k, v in baseline["settings"].items() if k not in left_out}
    return {"name": "pgtune", "pg": pg}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--profile", default="oltp")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--precision", type=float, default=3.0)
    parser.add_argument("--budget", default="60m")
    parser.add_argument("--tpcc", action="store_true", help="the TPC-C-like workload")
    parser.add_argument("--warehouses", type=int, default=8)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pgdyno-gain-", dir="/tmp"))
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o755)  # as root, the sandbox user must reach the clusters under it
    print(f"work directory: {workdir}", flush=True)
    workloads = ["tpcc"] if args.tpcc else ["select-only", "tpcb-like"]
    scale = args.warehouses if args.tpcc else args.scale
    pgdyno(workdir, "bench", "--pg-version", "18", "--workload", workloads[0], "--scale",
           str(scale), "-c", "1", "-T", "5", "--warmup", "0")  # fmt: skip
    tune = ["tune", "--sandbox", "--pg-version", "18", "--profile", args.profile, "--json"]
    ours = json.loads(pgdyno(workdir, *tune))
    theirs = json.loads(pgdyno(workdir, *tune, "--baseline", "pgtune"))
    for note in ours["notes"]:
        print(f"pgdyno note: {note}")
    for name, why in (theirs.get("left_out") or {}).items():
        print(f"pgtune's {name} left out: {why}")
    plan = {
        "name": "tuning-gain",
        "description": f"pgdyno's configuration vs pgtune's ({args.profile}), one run",
        "baseline": "defaults" if args.tpcc else "pgtune",
        "pg_version": 18,
        "matrix": {
            "workloads": workloads, "scales": [scale],
            "clients": [args.clients], "duration": args.duration, "warmup": 10, "prewarm": True,
            "precision": args.precision, "budget": args.budget,
        },
        "set": [
            *([{"name": "defaults"}] if args.tpcc else []), pgtune_set(theirs), ours_set(ours)
        ],
    }  # fmt: skip
    path = workdir / "tuning-gain.toml"
    path.write_text(tomli_w.dumps(plan))
    print(f"plan: {path}", flush=True)
    result = json.loads(pgdyno(workdir, "compare", str(path), "--json"))
    report(result)
    if args.tpcc:
        three_pairs(result)


def report(result: dict[str, Any]) -> None:
    rounds = result["rounds"]
    print(f"rounds: {rounds.get('rounds')}, stopped: {rounds.get('stopped')}")
    for row in result["analysis"]["results"]:
        change = row.get("tps_change")
        if row["set_name"] != "pgdyno" or change is None:
            continue
        cell = row["cell"]
        low, high = change.get("ci_low_pct"), change.get("ci_high_pct")
        interval = "no interval" if low is None else f"[{1 + low / 100:.3f}, {1 + high / 100:.3f}]"
        p99 = row.get("p99_change") or {}
        figure = str(row.get("figure", "tps")).upper()
        print(
            f"{cell['workload']:<12} scale {cell['scale']}, {cell['clients']} clients: "
            f"{figure} ratio pgdyno/{result['analysis']['baseline']} "
            f"{1 + change['change_pct'] / 100:.3f} {interval} "
            f"({change['verdict']}), p99 {p99.get('change_pct', float('nan')):+.1f}%"
        )


def three_pairs(result: dict[str, Any]) -> None:
    """NOPM of each pair of sets, paired by round, always-valid, 5% split over the three."""
    by_set: dict[str, dict[int, float]] = {}
    for run in result["runs"]:
        nopm = (run.get("tpcc") or {}).get("nopm")
        if run["status"] == "ok" and nopm and run.get("interference") is None:
            by_set.setdefault(run["set_name"], {})[run["repeat"]] = float(nopm)
    for cand, base in (("pgdyno", "pgtune"), ("pgdyno", "defaults"), ("pgtune", "defaults")):
        if cand not in by_set or base not in by_set:
            print(f"{cand}/{base}: no usable runs")
            continue
        tuned = result["rounds"].get("mixture_rounds")  # the budget's rounds, as the compare
        g = MIXTURE_G if tuned is None else mixture_for_rounds(tuned, 0.05 / 6)
        found = compare_rounds(by_set[base], by_set[cand], sequential=True, alpha=0.05 / 3, g=g)
        interval = (
            "no interval yet" if found.ci_low_pct is None or found.ci_high_pct is None
            else f"[{1 + found.ci_low_pct / 100:.3f}, {1 + found.ci_high_pct / 100:.3f}]"
        )  # fmt: skip
        print(f"tuning_gain tpcc: NOPM {cand}/{base} {1 + found.change_pct / 100:.3f} "
              f"{interval} ({found.verdict}, {found.pairs} rounds, "
              "98.3% always-valid)")  # fmt: skip


if __name__ == "__main__":
    main()
