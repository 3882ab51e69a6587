"""What each of pgdyno's samplers costs a CPU-saturated run, switched on and off inside one
pgbench run (issue 34, section 3): the same paired design as switching inside a run
(docs/statistics.md), so that the host's drift from one run to the next, which makes
`harness_overhead.py`'s run-against-run ratios 3-5 points wide, cancels within each pair.

    python benchmarks/sampler_cost.py [--arm waits|timeline|both|perf|all] [--hz 10] [--pairs 60]
                                      [--period 4] [--burn-in 1] [--seed 1]

One bare pgbench run (select-only, small scale, clients = CPUs, an aggregated log of one line a
second per thread, which costs both halves of every pair alike) on a throwaway PostgreSQL 18
sandbox. Beside it, `--pairs` pairs of `--period`-second periods in random order within the
pair (seeded): in one the arm runs, in the other nothing. The arms are pgdyno's own code,
as a run starts it:

- waits: the wait-event sampler alone (`WaitSampler.look` on its own connection, `--hz` looks
  a second, as the timeline sampler's thread makes them);
- timeline: the timeline sampler without waits (/proc and the pg_stat snapshot once a second);
- both: the timeline sampler with its wait looks at `--hz` (pgdyno's default collection but
  for the CPU profile and pgbench's log);
- perf: the on-CPU profile alone (perf at its default rate over every CPU, as `pgdyno bench`
  runs it, stopped as below);
- all: both, and the on-CPU profile (perf at its default rate over every CPU, as `pgdyno bench`
  runs it; stopped at the period's end without reading its samples, which a run does after
  pgbench has ended): every default sampler.

The arm is started at a period's first whole second and stopped at its end; the first
`--burn-in` seconds of every period (the switch, the sampler's start and first snapshot, perf's
start) are left out of both halves, so the ratio is what the sampler costs
while it runs. Printed: the geometric mean of the per-pair TPS ratios (on / off) with its 95%
t interval, and the median.

Also printed, to tell a sampler that takes CPU from the load from one that slows it otherwise:
the arm's own CPU over each period's measured seconds (this process's threads by name, its
server backend, perf) as a share of the CPU the host used, the context switches a second and
the steal (/proc/stat), each averaged over the on and the off periods; and the CPU each start
and stop costs beyond that steady rate (from just before the start to just after the stop).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from harness_overhead import pgdyno_run
from ratios import summarise
from throwaway import select_only, throwaway_sandbox

from pgdyno.collect.cpu_profile import CpuProfiler
from pgdyno.collect.pgstats import PgStatsSampler
from pgdyno.collect.procfs import ProcStat, parse_stat
from pgdyno.collect.sampler import TimelineSampler, next_planned, process_cpu_ticks
from pgdyno.collect.waits import WaitSampler
from pgdyno.host.perf import find_perf
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.postgres.server import backend_pid

ARMS = ("waits", "timeline", "both", "perf", "all")


class Arm(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


def host_stat() -> ProcStat:
    return parse_stat(Path("/proc/stat").read_text())


class CpuAccount:
    """What the arm used and what the host did, period by period: the arm's own CPU (this
    process, its server backend, perf) over the measured seconds as a share of the host's busy
    CPU, the context switches a second and the steal share; and the CPU of each start and stop
    beyond the steady rate."""

    def __init__(self, sampler_backend: int) -> None:
        self.pids = (os.getpid(), sampler_backend)
        self.perf_pid: Callable[[], int | None] = lambda: None  # set by Profiled
        self.perf_at_stop = 0  # perf's ticks just before it was stopped
        self.share: dict[bool, list[float]] = defaultdict(list)  # on -> share of busy CPU
        self.ctxt: dict[bool, list[float]] = defaultdict(list)
        self.steal: dict[bool, list[float]] = defaultdict(list)
        self.start_stop: list[float] = []  # seconds of CPU
        self.by_part: Counter[str] = Counter()  # on periods' measured ticks, per part
        self.busy_on = 0  # the host's busy ticks over the same seconds

    def parts(self) -> Counter[str]:
        """Ticks so far of pgdyno's threads (by name), its server backend and perf."""
        perf = self.perf_pid()
        pids = {"its backend": self.pids[1], "perf": perf}
        found = Counter(
            {part: process_cpu_ticks(pid, Path("/proc")) or 0 for part, pid in pids.items() if pid}
        )
        for thread in threading.enumerate():
            tid = thread.native_id
            ticks = process_cpu_ticks(tid, Path(f"/proc/{self.pids[0]}/task")) if tid else None
            found[f"pgdyno thread {thread.name}"] += ticks or 0
        return found

    def own(self) -> int:
        """Ticks so far of pgdyno's process (its ended threads too, which `parts` cannot name),
        its server backend and perf."""
        perf = self.perf_pid()
        pids = (*self.pids, *([perf] if perf else []))
        return sum(process_cpu_ticks(pid, Path("/proc")) or 0 for pid in pids)

    def add(self, on: bool, steady: int, window: tuple[ProcStat, ProcStat], seconds: float) -> None:
        """One period: the arm's ticks over its measured `seconds` and the host's /proc/stat
        at their ends."""
        a, b = window[1].cpu, window[0].cpu
        busy = sum(getattr(a, f) - getattr(b, f) for f in ("user", "nice", "system", "irq",
                                                           "softirq", "steal"))  # fmt: skip
        total = busy + (a.idle - b.idle) + (a.iowait - b.iowait)
        self.share[on].append(steady / busy if busy else 0.0)
        if on:
            self.busy_on += busy
        self.ctxt[on].append((window[1].ctxt - window[0].ctxt) / seconds)
        self.steal[on].append((a.steal - b.steal) / total if total else 0.0)

    def add_whole(self, whole: int, steady: int, seconds: tuple[float, float]) -> None:
        """An on period's ticks from just before its start to just after its stop, against
        its steady ticks over the measured part: (whole period, measured) seconds."""
        extra = whole + self.perf_at_stop - steady * seconds[0] / seconds[1]
        self.start_stop.append(extra / os.sysconf("SC_CLK_TCK"))
        self.perf_at_stop = 0

    def print(self) -> None:
        for on in (True, False):
            print(
                f"  arm {'on ' if on else 'off'}: its own CPU "
                f"{100 * statistics.mean(self.share[on]):.2f}% of the host's busy CPU, "
                f"{statistics.mean(self.ctxt[on]):,.0f} context switches a second, steal "
                f"{100 * statistics.mean(self.steal[on]):.1f}%"
            )
        split = ", ".join(
            f"{part} {100 * n / self.busy_on:.2f}%" for part, n in self.by_part.most_common()
        )
        print(f"  the arm's own CPU, on: {split}")
        print(
            f"  each start and stop: about {1000 * statistics.mean(self.start_stop):.0f} ms of "
            "CPU beyond the steady rate (a run pays it once)"
        )


class WaitLooks:
    """The wait sampler alone: `hz` looks a second from a thread of nice 10, as the timeline
    sampler's thread makes them."""

    def __init__(self, client: Client, hz: int) -> None:
        self.sampler = WaitSampler(client, BENCH_DB, hz, print)
        self.step = 1.0 / hz
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            now = time.time()
            if self._stop.wait(next_planned(now, self.step) - now):
                return
            self.sampler.look(time.time())

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class Timeline:
    """The timeline sampler as a run starts it, with wait looks at `hz` (0: none)."""

    def __init__(self, client: Client, hz: int) -> None:
        self.client, self.hz = client, hz
        self.version = client.server_info().version_num
        self.sampler: TimelineSampler | None = None

    def start(self) -> None:
        pg = PgStatsSampler(self.client, self.version, BENCH_DB, print, wait_hz=self.hz)
        self.sampler = TimelineSampler(log=print, proc_root=Path("/proc"), pg=pg)
        self.sampler.start()

    def stop(self) -> None:
        if self.sampler is not None:
            timeline = self.sampler.stop()
            if timeline.gaps:
                print(f"  the sampler had gaps: {timeline.gaps}")


class Nothing:
    """No sampler: the arm the profile alone is added to."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class Profiled:
    """Another arm with the on-CPU profile beside it."""

    def __init__(
        self, inner: Arm, perf: Path, postmaster: int, run_dir: Path, account: CpuAccount
    ) -> None:
        self.inner, self.account = inner, account
        self.profiler = lambda: CpuProfiler(perf, postmaster, run_dir, log=print)
        self.running: CpuProfiler | None = None
        account.perf_pid = lambda: self.running.perf_pid if self.running is not None else None

    def start(self) -> None:
        self.running = self.profiler()
        self.running.start()
        self.inner.start()

    def stop(self) -> None:
        self.inner.stop()
        if self.running is not None:
            pid = self.running.perf_pid  # its ticks before it ends, not its file's writing
            self.account.perf_at_stop = (process_cpu_ticks(pid, Path("/proc")) or 0) if pid else 0
            self.running.abort()
            self.running = None


def sleep_until(at: float) -> None:
    delay = at - time.time()
    if delay > 0:
        time.sleep(delay)


def per_second(prefix: Path) -> dict[int, int]:
    """Transactions per second summed over pgbench's threads, from its aggregated logs (each
    line: interval start, transactions, ...)."""
    counts: dict[int, int] = defaultdict(int)
    for path in prefix.parent.glob(f"{prefix.name}.*"):
        for line in path.read_text().splitlines():
            fields = line.split()
            counts[int(fields[0])] += int(fields[1])
    return counts


def switched(
    arm: Arm, args: argparse.Namespace, argv: list[str], prefix: Path, account: CpuAccount
) -> list[float]:
    """Per pair: TPS with the arm on / off, over the whole seconds after each period's first;
    `account` gets each period's CPU."""
    rng = random.Random(args.seed)
    orders = [rng.random() < 0.5 for _ in range(args.pairs)]  # True: on first
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as load:
        begin = float(int(time.time()) + 2 * args.period)  # a warm-up first
        periods: list[tuple[int, bool]] = []  # (first second, arm on)
        at = begin
        for on_first in orders:
            for on in (on_first, not on_first):
                sleep_until(at)
                first = account.own()
                if on:
                    arm.start()
                periods.append((int(at), on))
                sleep_until(at + args.burn_in)
                before, used = host_stat(), account.parts()
                at += args.period
                sleep_until(at)
                now = account.parts()
                steady, after = sum(now.values()) - sum(used.values()), host_stat()
                if on:
                    account.by_part.update(now - used)
                account.add(on, steady, (before, after), args.period - args.burn_in)
                if on:
                    arm.stop()
                    whole = (account.own() - first, steady)
                    account.add_whole(*whole, (args.period, args.period - args.burn_in))
        _, err = load.communicate(timeout=120)
        if load.returncode != 0:
            raise SystemExit(f"pgbench failed: {err.decode(errors='replace').strip()}")
    counts = per_second(prefix)
    ratios, levels = [], []
    for i in range(0, len(periods), 2):
        tps = {}
        for first, on in periods[i : i + 2]:
            seconds = range(first + args.burn_in, first + args.period)  # the switch left out
            tps[on] = sum(counts.get(s, 0) for s in seconds) / len(seconds)
        ratios.append(tps[True] / tps[False])
        levels.append(tps[False])
    print(
        f"  the load without the arm: {min(levels):,.0f}-{max(levels):,.0f} TPS a period "
        f"(median {statistics.median(levels):,.0f}): the host's state during the run"
    )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=ARMS, default="all")
    parser.add_argument("--hz", type=int, default=10, help="wait looks a second")
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--period", type=int, default=4, help="seconds (the first left out)")
    parser.add_argument("--burn-in", type=int, default=1, help="whole seconds left out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    if not 1 <= args.burn_in < args.period:
        parser.error("--burn-in must be at least 1 and under --period")
    seconds = (2 * args.pairs + 3) * args.period
    with throwaway_sandbox("pgdyno-sampler-cost-") as (workdir, binaries, box):
        pgdyno_run(workdir, args.clients, 3, "auto")  # the dataset
        log_dir = workdir / "load-log"
        log_dir.mkdir(mode=0o777)
        log_dir.chmod(0o777)
        prefix = log_dir / "tx"
        argv = select_only(
            binaries, box, args.clients, seconds, "-l", f"--log-prefix={prefix}",
            "--aggregate-interval=1",
        )  # fmt: skip
        with connect(box.conninfo(BENCH_DB)) as client:
            account = CpuAccount(backend_pid(client))
            hz = 0 if args.arm in {"timeline", "perf"} else args.hz
            arm: Arm = (
                Nothing() if args.arm == "perf"
                else WaitLooks(client, hz) if args.arm == "waits"
                else Timeline(client, hz)
            )  # fmt: skip
            if args.arm in {"perf", "all"}:
                perf, postmaster = find_perf(os.environ), box.postmaster_pid()
                if perf is None or postmaster is None:
                    raise SystemExit("the profile needs perf (linux-perf) and a running sandbox")
                arm = Profiled(arm, perf, postmaster, workdir / "perf", account)
            print(f"select-only, small scale, {args.clients} clients, one {seconds} s pgbench run;"
                  f" arm {args.arm} (waits at {hz} Hz), {args.pairs} pairs of {args.period} s "
                  "periods")  # fmt: skip
            ratios = switched(arm, args, argv, prefix, account)
            account.print()
    print(f"sampler_cost: {args.arm} (waits at {hz} Hz) on / off, TPS ratio "
          f"{summarise(ratios)} ({args.pairs} pairs of {args.period} s periods, the first "
          f"{args.burn_in} s of each left out)")  # fmt: skip


if __name__ == "__main__":
    main()
