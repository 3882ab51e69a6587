"""What a reload costs the load right after it: the switch cost that switching inside one run
drops with its burn-in (docs/statistics.md, "Switching inside one run").

    python benchmarks/reload_dip.py [--seconds 180] [--every 6] [--clients N] [--bin-ms 100]

One select-only pgbench run (small scale, clients = CPUs, per-transaction log) on a throwaway
PostgreSQL 18 sandbox. Every `--every` seconds the sandbox's settings are put in effect as a
switching comparison does it: the settings file rewritten (log_min_duration_statement
alternating between -1 and 100 s, a value no statement reaches) and a reload, waited for until
pg_conf_load_time moves; that moment is the switch, as the engine's `switched_at`. Halfway
between two switches a control moment is taken with no reload.

Printed, for the switches and for the controls: the throughput in bins of `--bin-ms` from 1 s
before to 2 s after the moment, relative to the second before it, the mean over the moments
with its standard error; and the transactions lost in the 2 s after the moment, in
milliseconds of the load (the sum over bins of 1 - relative throughput, times the bin). The
controls are the noise: a switch cost shows as the switches' bins below the controls'.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
from harness_overhead import pgdyno_run
from throwaway import select_only, throwaway_sandbox

from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.server import reloaded

VALUES = ("-1", "100s")
BEFORE_S, AFTER_S = 1.0, 2.0


def switch(box: Sandbox, value: str) -> float:
    """The settings put in effect as a switching comparison on the sandbox does it (its
    switcher's own call, experiment/sandbox_sets.py); the epoch second it was seen done."""
    reloaded(box.conninfo(), None, "the sandbox",
             lambda _client: box.reload({"log_min_duration_statement": value}))  # fmt: skip
    return time.time()


def switching(box: Sandbox, every: float, stop: threading.Event) -> tuple[list[float], list[float]]:
    """Switches every `every` seconds until `stop`; the switch moments and the controls."""
    switches: list[float] = []
    controls: list[float] = []
    stop.wait(3.0)  # pgbench connected and running
    n = 0
    while not stop.is_set():
        switches.append(switch(box, VALUES[n % 2]))
        n += 1
        if stop.wait(every / 2):
            break
        controls.append(time.time())
        stop.wait(every / 2)
    return switches, controls


def completions(log_dir: Path) -> np.ndarray:
    """Each transaction's completion, epoch seconds, from pgbench's per-transaction logs
    (`client transaction time script epoch microseconds`)."""
    found = []
    for path in log_dir.glob("tx*"):
        for line in path.read_text().splitlines():
            fields = line.split()
            found.append(int(fields[4]) + int(fields[5]) / 1e6)
    return np.sort(np.array(found))


def profile(done: np.ndarray, moments: list[float], bin_s: float) -> np.ndarray:
    """Per moment (rows), the throughput of each bin from BEFORE_S before it to AFTER_S after
    it, relative to the mean bin of the second before it."""
    edges = np.arange(-BEFORE_S, AFTER_S + bin_s / 2, bin_s)
    rows = []
    for moment in moments:
        counts = np.diff(np.searchsorted(done, moment + edges)).astype(float)
        before = counts[: round(BEFORE_S / bin_s)].mean()
        if before > 0:
            rows.append(counts / before)
    return np.array(rows)


def lost_ms(rows: np.ndarray, bin_s: float) -> tuple[float, float]:
    """The load lost in the AFTER_S after the moment, ms: its mean over moments and its SE."""
    after = rows[:, round(BEFORE_S / bin_s) :]
    lost = (1.0 - after).sum(axis=1) * bin_s * 1000.0
    return float(lost.mean()), float(lost.std(ddof=1) / np.sqrt(lost.size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=180)
    parser.add_argument("--every", type=float, default=6.0)
    parser.add_argument("--clients", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--bin-ms", type=int, default=100)
    args = parser.parse_args()
    bin_s = args.bin_ms / 1000.0
    with throwaway_sandbox("pgdyno-reload-dip-") as (workdir, binaries, box):
        pgdyno_run(workdir, args.clients, 3, "auto")  # the dataset
        log_dir = workdir / "tx-logs"
        log_dir.mkdir()
        argv = select_only(binaries, box, args.clients, args.seconds, "-l",
                           f"--log-prefix={log_dir / 'tx'}")  # fmt: skip
        stop = threading.Event()
        found: list[tuple[list[float], list[float]]] = []
        worker = threading.Thread(target=lambda: found.append(switching(box, args.every, stop)))
        worker.start()
        try:
            subprocess.run(argv, check=True, capture_output=True)
        finally:
            stop.set()
            worker.join()
        switches, controls = found[0]
        done = completions(log_dir)
    print(f"select-only, {args.clients} clients, {args.seconds} s, a reload every "
          f"{args.every} s: {len(switches)} switches, {len(controls)} controls, "
          f"{done.size:,} transactions")  # fmt: skip
    end = done[-1] - AFTER_S
    rows = {
        "switches": profile(done, [m for m in switches if m < end], bin_s),
        "controls": profile(done, [m for m in controls if m < end], bin_s),
    }
    first = round(BEFORE_S / bin_s)
    print(f"{'ms after':>9} {'switches':>16} {'controls':>16}")
    for k in range(first, rows["switches"].shape[1]):
        cells = [
            f"{r[:, k].mean():.3f} +- {r[:, k].std(ddof=1) / np.sqrt(len(r)):.3f}"
            for r in rows.values()
        ]
        print(f"{(k - first) * args.bin_ms:>9} {cells[0]:>16} {cells[1]:>16}")
    for name, r in rows.items():
        mean, se = lost_ms(r, bin_s)
        print(f"reload_dip: {name}: {mean:+.1f} ms of load lost in the {AFTER_S:.0f} s after "
              f"(se {se:.1f}, {len(r)} moments)")  # fmt: skip


if __name__ == "__main__":
    main()
