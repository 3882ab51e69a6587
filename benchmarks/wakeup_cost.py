"""What a process that only wakes up costs a CPU-saturated pgbench run: bare pgbench beside an
idle waker (a process asleep but for `--hz` wake-ups a second, doing nothing when awake)
against bare pgbench alone (issue 34, section 3: where the harness's 2-3% goes).

    python benchmarks/wakeup_cost.py [--pairs 12] [--seconds 10] [--hz 20] [--threads 1]

Select-only at the small scale with clients = CPUs, on a throwaway PostgreSQL 18 sandbox;
the two arms in alternating order. The waker's CPU time is printed beside the ratio: if the
ratio falls by more than that share of the machine, waking up costs the load more than the
CPU it takes (a preempted client or backend, a cache or a CPU placement lost), which is what
pgdyno's samplers do several times a second during a run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys

from harness_overhead import bare_tps, pgdyno_run
from ratios import summarise
from throwaway import select_only, throwaway_sandbox

WAKER = """
import sys, threading, time
hz, threads = float(sys.argv[1]), int(sys.argv[2])
def wake():
    while True:
        time.sleep(1.0 / hz)
for _ in range(threads - 1):
    threading.Thread(target=wake, daemon=True).start()
wake()
"""


def measured(argv: list[str], waker: tuple[float, int] | None) -> tuple[float, float]:
    """Bare pgbench's TPS, beside the waker (`waker`: its rate and threads) or alone, and the
    CPU seconds of the children that ended meanwhile (pgbench, and the waker when there is
    one: the difference between the arms is the waker's, as near as one run tells)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    beside = (
        subprocess.Popen([sys.executable, "-c", WAKER, str(waker[0]), str(waker[1])])
        if waker is not None
        else None
    )
    try:
        tps = bare_tps(argv)
    finally:
        if beside is not None:
            beside.kill()
            beside.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return tps, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--hz", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    ratios, extra_cpu = [], []
    with throwaway_sandbox("pgdyno-wakeups-") as (workdir, binaries, box):
        pgdyno_run(workdir, args.clients, 3, "auto")  # the dataset
        argv = select_only(binaries, box, args.clients, args.seconds)
        for i in range(args.pairs):
            arms = ("waker", "alone") if i % 2 == 0 else ("alone", "waker")
            found = {
                arm: measured(argv, (args.hz, args.threads) if arm == "waker" else None)
                for arm in arms
            }
            ratios.append(found["waker"][0] / found["alone"][0])
            extra_cpu.append(found["waker"][1] - found["alone"][1])
            print(f"  round {i + 1}: beside the waker {found['waker'][0]:,.0f}, alone "
                  f"{found['alone'][0]:,.0f} TPS")  # fmt: skip
    cpus = len(os.sched_getaffinity(0))
    share = sum(extra_cpu) / len(extra_cpu) / (args.seconds * cpus)
    print(f"wakeup_cost: bare pgbench beside {args.threads} thread(s) waking {args.hz:g} times "
          f"a second / alone, TPS ratio {summarise(ratios)} ({args.pairs} rounds); the waker's "
          f"CPU and pgbench's difference: {100 * share:+.2f}% of the machine")  # fmt: skip


if __name__ == "__main__":
    main()
