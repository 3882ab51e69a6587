"""Where the timeline sampler's thread spends its CPU under a saturating load, and what one wait
look costs after the thread has slept (issue 34, section 3).

    python benchmarks/sampler_profile.py [--hz 10,4] [--seconds 30] [--clients N]

On a throwaway PostgreSQL 18 sandbox, beside bare pgbench (select-only, small scale, clients =
CPUs):

1. For each rate of `--hz`, the timeline sampler as a run starts it (/proc and the pg_stat
   snapshot once a second, wait looks at that rate) for `--seconds`; printed, the thread's CPU
   a second (CLOCK_THREAD_CPUTIME_ID) split into the wait looks, the two snapshots, the
   sample's arithmetic and the loop itself.
2. One wait look from a thread of nice 10 (as the sampler's), after sleeping 10 ms to 500 ms,
   against the same look made back to back (the baseline, measured in the same run): the
   ratio says how much of a look's CPU is the wake-up's, not the look's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_overhead import pgdyno_run
from throwaway import select_only, throwaway_sandbox

from pgdyno.collect.pgstats import PgStatsSampler
from pgdyno.collect.procfs import ProcReader
from pgdyno.collect.sampler import TimelineSampler
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.footprint import BENCH_DB

SLEEPS_S = (0.01, 0.05, 0.1, 0.25, 0.5)


class ThreadCpu:
    """Thread CPU per labelled call, summed (methods of one sampler instance wrapped)."""

    def __init__(self) -> None:
        self.used: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, method: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(owner, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.used[label] += time.thread_time() - began
                self.calls[label] += 1

        setattr(owner, method, timed)


def sampler_split(client: Client, hz: int, seconds: float) -> None:
    """The sampler's thread CPU over `seconds`, split by what it did."""
    cpu = ThreadCpu()
    pg = PgStatsSampler(client, client.server_info().version_num, BENCH_DB, print, wait_hz=hz)
    if pg.waits is not None:
        cpu.wrap(pg.waits, "look", "wait looks")
    cpu.wrap(pg, "snapshot", "pg_stat snapshot")
    proc = ProcReader(Path("/proc"), None)
    cpu.wrap(proc, "snapshot", "/proc snapshot")
    sampler = TimelineSampler(log=print, proc_root=Path("/proc"), pg=pg, os_source=proc)
    cpu.wrap(sampler, "_record", "the sample's arithmetic")
    whole: list[float] = []
    loop = sampler._loop  # the thread's body, timed whole from inside the thread

    def timed_loop(*args: Any) -> None:
        began = time.thread_time()
        try:
            loop(*args)
        finally:
            whole.append(time.thread_time() - began)

    sampler._loop = timed_loop  # type: ignore[method-assign]
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    total = whole[0] if whole else float("nan")
    per_s = 1000 * total / seconds
    print(f"  waits at {hz} Hz: the sampler's thread {per_s:.1f} ms of CPU a second")
    for label, used in sorted(cpu.used.items(), key=lambda kv: -kv[1]):
        each = 1000 * used / cpu.calls[label]
        print(f"    {label}: {1000 * used / seconds:.2f} ms/s ({each:.3f} ms a call)")
    rest = total - sum(cpu.used.values())
    print(f"    the loop itself (planning, waking): {1000 * rest / seconds:.2f} ms/s")


def look_after_sleep(client: Client, calls: int) -> None:
    """One wait look's thread CPU after each sleep of SLEEPS_S, against back to back."""
    pg = PgStatsSampler(client, client.server_info().version_num, BENCH_DB, print, wait_hz=10)
    waits = pg.waits
    assert waits is not None
    results: dict[float, float] = {}

    def body() -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        for sleep in (0.0, *SLEEPS_S):
            used = 0.0
            n = calls if sleep < 0.25 else calls // 4
            for _ in range(n):
                if sleep:
                    time.sleep(sleep)
                began = time.thread_time()
                waits.look(time.time())
                used += time.thread_time() - began
            results[sleep] = used / n

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    hot = results[0.0]
    print(f"  one wait look back to back (the baseline): {1000 * hot:.3f} ms of CPU")
    for sleep in SLEEPS_S:
        print(
            f"  after {1000 * sleep:.0f} ms asleep: {1000 * results[sleep]:.3f} ms, "
            f"{results[sleep] / hot:.1f} times the baseline; at {1 / sleep:.0f} looks a second "
            f"{1000 * results[sleep] / sleep:.1f} ms/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hz", default="10,4", help="wait look rates, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--calls", type=int, default=80, help="looks per sleep length")
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    rates = [int(hz) for hz in args.hz.split(",")]
    load_s = int(len(rates) * args.seconds + args.calls * sum(SLEEPS_S) + 60)
    with throwaway_sandbox("pgdyno-sampler-profile-") as (workdir, binaries, box):
        pgdyno_run(workdir, args.clients, 3, "auto")  # the dataset
        argv = select_only(binaries, box, args.clients, load_s)
        with (
            connect(box.conninfo(BENCH_DB)) as client,
            subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as load,
        ):
            try:
                time.sleep(3)
                print(f"beside bare pgbench (select-only, {args.clients} clients):")
                for hz in rates:
                    sampler_split(client, hz, args.seconds)
                look_after_sleep(client, args.calls)
            finally:
                load.kill()


if __name__ == "__main__":
    main()
