"""Harness cost: the CPU time each part of pgdyno's harness takes during a real `pgdyno bench`.

    python benchmarks/harness_cost.py [--runs 3] [--seconds 10] [--ticks 200]

TPS ratios (benchmarks/harness_overhead.py) need a quiet host and many rounds to show a 1%
effect; CPU time barely moves with the neighbours, so this is the ablation of the overhead. It
runs select-only at the small scale with 2 clients on a PostgreSQL 18 sandbox and measures,
over the measured pgbench run of each `pgdyno bench` (from the moment pgbench with its
transaction log is started to the moment it exits, seen through a pidfd):

* pgdyno's own process, per thread (time on a CPU from /proc/<pid>/task/<tid>/schedstat, in
  ns; wake-ups are the voluntary context switches of .../status): the main thread (waits on
  pgbench, drives the progress display), the sampler thread (the one niced to 10), and the
  rest (Rich's refresh thread on a terminal). Threads are read every 0.1 s, so a sampler that
  ends as soon as pgdyno sees pgbench exit keeps its last reading;
* the server backends of pgdyno's own connections (database `postgres`; pgbench works in
  pgdyno_bench) and the transactions they commit per second (pg_stat_database.xact_commit;
  backends flush it within a second, so it also holds some of pgdyno's queries from just
  before the run: about +0.5/s);
* pgbench's transaction log: CPU per transaction (getrusage of the child) with and without
  the run's -l/--sampling-rate options, on a script without SQL (only pgbench's own work is
  left, so the log's share is exact whatever the neighbours do), times the run's TPS; the
  same difference on the run's own command is printed too (it moves with the machine's load).

Every round runs `pgdyno bench` twice: stderr on a pseudo-terminal (the progress bar a user
sees) and on a pipe (CI, scripts, harness_overhead.py). Then one sampler tick is taken apart
in-process: the thread CPU time of each step over `--ticks` ticks, and the server CPU of the
pg_stat snapshot (a run's ticks cost more: each wakes up on caches the benchmark has cooled), and
the wait sampler's looks at pg_stat_activity (collect/waits.py), ten a second by default.
Figures are medians over the runs, in CPU milliseconds per second of run, and as % of the
machine (all its CPUs). To compare with other code, run it with PYTHONPATH pointing at
another copy of the package: the `pgdyno bench` it starts inherits it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from throwaway import throwaway_sandbox

from pgdyno.collect.pgstats import PgStatsSampler, pg_sample
from pgdyno.collect.procfs import ProcReader, os_sample
from pgdyno.collect.sampler import process_cpu_ticks
from pgdyno.collect.waits import DEFAULT_HZ, WaitSampler
from pgdyno.pgbench.output import parse_summary
from pgdyno.postgres.client import Client
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import BENCH_DB

PROC = Path("/proc")
CPUS = len(os.sched_getaffinity(0))
SAMPLER_NICE = 10  # collect/sampler.py lowers its thread's priority to this


# -- /proc of pgdyno's process ------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadUse:
    cpu_ns: int  # time on a CPU (/proc/.../schedstat: nanoseconds, unlike stat's 10 ms ticks)
    wakeups: int  # voluntary context switches
    nice: int


def cpu_ns(task: Path) -> int:
    return int((task / "schedstat").read_text().split()[0])


def thread_use(task: Path) -> ThreadUse:
    nice = int((task / "stat").read_text().rsplit(")", 1)[1].split()[16])
    status = (task / "status").read_text()
    wakeups = next(
        int(line.split()[1])
        for line in status.splitlines()
        if line.startswith("voluntary_ctxt_switches")
    )
    return ThreadUse(cpu_ns(task), wakeups, nice)


def threads(pid: int) -> dict[int, ThreadUse]:
    out: dict[int, ThreadUse] = {}
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return out  # the process has ended
    for task in tasks:
        try:
            out[int(task.name)] = thread_use(task)
        except (OSError, StopIteration):
            continue  # ended between the listing and the read
    return out


def measured_pgbench(pid: int) -> int | None:
    """The child of `pid` that writes the transaction log (the measured run), if started."""
    for task in (PROC / str(pid) / "task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                argv = (PROC / child / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(arg.startswith(b"--log-prefix=") for arg in argv):
                return int(child)
    return None


# -- the server side ------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerUse:
    cpu_ns: dict[int, int]  # backend pid -> time on a CPU
    commits: int  # xact_commit of database postgres


def server_use(monitor: Client) -> ServerUse:
    pids = monitor.rows(
        "SELECT pid FROM pg_stat_activity WHERE datname = 'postgres' "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    )
    used = {}
    for (pid,) in pids:
        with contextlib.suppress(OSError):
            used[int(pid)] = cpu_ns(PROC / str(pid))
    commits = monitor.rows("SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")[
        0
    ][0]
    return ServerUse(used, int(commits))


# -- one pgdyno bench, watched --------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """What each source used between the start and the exit of the measured pgbench."""

    seconds: float
    cpu_ms: dict[str, float]  # source -> CPU milliseconds
    wakeups: dict[str, int]  # pgdyno thread -> voluntary context switches
    commits: int
    run: dict[str, Any]  # the run as `pgdyno bench --json` prints it


def role(pid: int, tid: int, use: ThreadUse) -> str:
    if tid == pid:
        return "main"
    return "sampler" if use.nice == SAMPLER_NICE else "other"


def diff(
    pid: int,
    before: tuple[dict[int, ThreadUse], ServerUse],
    after: tuple[dict[int, ThreadUse], ServerUse],
) -> tuple[dict[str, float], dict[str, int], int]:
    """CPU ms per source, wake-ups per pgdyno thread, and transactions of pgdyno's sessions."""
    (t0, s0), (t1, s1) = before, after
    ms: dict[str, float] = {"main": 0.0, "sampler": 0.0, "other": 0.0}
    wakeups: dict[str, int] = {"main": 0, "sampler": 0, "other": 0}
    for tid, use in t1.items():
        start = t0.get(tid, ThreadUse(0, 0, use.nice))
        name = role(pid, tid, use)
        ms[name] += (use.cpu_ns - start.cpu_ns) / 1e6
        wakeups[name] += use.wakeups - start.wakeups
    ms["server"] = sum(t - s0.cpu_ns.get(b, t) for b, t in s1.cpu_ns.items()) / 1e6
    return ms, wakeups, s1.commits - s0.commits


@contextmanager
def drained_pty() -> Iterator[int]:
    """A pseudo-terminal's slave end, its output read and dropped by a thread."""
    master, slave = pty.openpty()

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:  # EIO once every slave end is closed
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield slave
    finally:
        os.close(slave)
        reader.join(timeout=5)
        os.close(master)


def bench_argv(workdir: Path, seconds: int, wait_hz: int = DEFAULT_HZ) -> list[str]:
    return [
        sys.executable, "-m", "pgdyno", "bench", "--workdir", str(workdir), "--pg-version", "18",
        "-w", "select-only", "-s", "small", "-c", "2", "-T", str(seconds),
        "--wait-sample-hz", str(wait_hz), "--json",
    ]  # fmt: skip


def watch(proc: subprocess.Popen[str], monitor: Client) -> tuple[float, Any, Any]:
    """Snapshots at the start and at the exit of the measured pgbench of `proc`."""
    pgbench = None
    while pgbench is None:
        if proc.poll() is not None:
            raise SystemExit(f"pgdyno bench ended before its run: {proc.stderr}")
        pgbench = measured_pgbench(proc.pid)
        if pgbench is None:
            time.sleep(0.02)
    exited = os.pidfd_open(pgbench)
    started = time.monotonic()
    before = (threads(proc.pid), server_use(monitor))
    # pgdyno may see pgbench's exit first and end its sampler thread: keep the last reading
    # of every thread (a tenth of a second old at worst).
    last = dict(before[0])
    while not select.select([exited], [], [], 0.1)[0]:
        last |= threads(proc.pid)
    seconds = time.monotonic() - started
    last |= threads(proc.pid)
    after = (last, server_use(monitor))
    os.close(exited)
    return seconds, before, after


def watched_bench(
    workdir: Path, seconds: int, monitor: Client, *, tty: bool, wait_hz: int = DEFAULT_HZ
) -> Window:
    with drained_pty() as slave:
        stderr: int = slave if tty else subprocess.PIPE
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
        argv = bench_argv(workdir, seconds, wait_hz)
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env) as p:
            window, before, after = watch(p, monitor)
            out, err = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"pgdyno bench failed: {err}")
    ms, wakeups, commits = diff(p.pid, before, after)
    return Window(window, ms, wakeups, commits, json.loads(out)[0])


# -- pgbench's transaction log --------------------------------------------------------------


def log_options(argv: list[str]) -> list[str]:
    """
    >>> log_options(["pgbench", "-c", "2", "-l", "--log-prefix=/r/tx", "--sampling-rate=0.05"])
    ['-l', '--log-prefix=/r/tx', '--sampling-rate=0.05']
    """
    return [a for a in argv if a == "-l" or a.startswith(("--log-prefix=", "--sampling-rate="))]


def without_log(argv: list[str]) -> list[str]:
    """
    >>> without_log(["pgbench", "-l", "--log-prefix=/r/tx", "--sampling-rate=0.05", "db"])
    ['pgbench', 'db']
    """
    return [a for a in argv if a not in log_options(argv)]


def with_log_in(argv: list[str], log_dir: Path) -> list[str]:
    return [f"--log-prefix={log_dir / 'tx'}" if a.startswith("--log-prefix=") else a for a in argv]


def cpu_per_tx_ns(argv: list[str]) -> float:
    """pgbench's own CPU time (user + system) per transaction, in nanoseconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu * 1e9 / (parse_summary(out).transactions or 1)


def log_cost_ns(argv: list[str], runs: int) -> tuple[float, float]:
    """Median CPU per transaction of `argv` without and with its log, runs interleaved."""
    bare: list[float] = []
    logged: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pgdyno-cost-log-") as log_dir:
        for i in range(runs):
            arms = [(bare, without_log(argv)), (logged, with_log_in(argv, Path(log_dir)))]
            for into, command in arms if i % 2 == 0 else arms[::-1]:
                into.append(cpu_per_tx_ns(command))
            for path in Path(log_dir).glob("tx*"):
                path.unlink()
    return statistics.median(bare), statistics.median(logged)


def client_only(pgbench: str, conninfo: str, log: list[str], workdir: Path) -> list[str]:
    """pgbench on a script without SQL: only pgbench's own per-transaction work is left,
    so the log's share of it shows clearly whatever else runs on the machine."""
    script = workdir / "no-sql.pgbench"
    script.write_text("\\set aid random(1, 100000)\n")
    return [pgbench, "-n", "-f", str(script), "-t", "20000000", *log, conninfo]


# -- one sampler tick, taken apart ----------------------------------------------------------


def thread_ms(step: Callable[[], object], ticks: int) -> float:
    """Thread CPU milliseconds of one call of `step`, averaged over `ticks` calls."""
    start = time.thread_time()
    for _ in range(ticks):
        step()
    return (time.thread_time() - start) * 1000 / ticks


def tick_parts(box: Sandbox, devices: list[str] | None, ticks: int) -> dict[str, float]:
    """CPU ms of each step of one sampler tick (pgdyno's side) and of the server's side."""
    parts: dict[str, float] = {}
    proc = ProcReader(PROC, devices)
    prev, cur = proc.snapshot(), proc.snapshot()
    parts["/proc snapshot (read + parse)"] = thread_ms(proc.snapshot, ticks)
    parts["OS metrics (os_sample)"] = thread_ms(lambda: os_sample(prev, cur, devices), ticks)
    with Client(box.conninfo()) as client:
        pg = PgStatsSampler(client, client.server_version_num, BENCH_DB, print)
        backend = int(client.rows("SELECT pg_backend_pid()")[0][0])
        for _ in range(6):
            pg.snapshot()  # as in a run: psycopg has prepared the statement by now
        server_before = cpu_ns(PROC / str(backend))
        parts["pg_stat snapshot (client side)"] = thread_ms(pg.snapshot, ticks)
        server_after = cpu_ns(PROC / str(backend))
        parts["pg_stat snapshot (server backend)"] = (server_after - server_before) / 1e6 / ticks
        a, b = pg.snapshot(), pg.snapshot()
        # The wait sampler looks DEFAULT_HZ times a second: its ms per look times that rate.
        waits = WaitSampler(client, BENCH_DB, DEFAULT_HZ, print)
        for i in range(6):
            waits.look(float(i))  # prepared by psycopg, as in a run
        server_before = cpu_ns(PROC / str(backend))
        look_ms = thread_ms(lambda: waits.look(time.time()), ticks)
        server_after = cpu_ns(PROC / str(backend))
        parts[f"wait looks x{DEFAULT_HZ} (client side)"] = look_ms * DEFAULT_HZ
        parts[f"wait looks x{DEFAULT_HZ} (server backend)"] = (
            (server_after - server_before) / 1e6 / ticks * DEFAULT_HZ
        )
    parts["pg_stat metrics (pg_sample)"] = thread_ms(lambda: pg_sample(a, b, 1.0), ticks)
    parts["pgbench CPU (/proc/<pid>/stat)"] = thread_ms(
        lambda: process_cpu_ticks(os.getpid(), PROC), ticks
    )
    return parts


# -- the table ------------------------------------------------------------------------------

WAIT_PARTS = ("sampler", "server")  # where the wait looks cost: pgdyno's thread and the server


def row(name: str, ms_per_s: float, extra: str = "") -> str:
    share = 100 * ms_per_s / (1000 * CPUS)
    return f"  {name:46} {ms_per_s:8.2f} ms/s {share:7.3f}%  {extra}"


def median_of(windows: list[Window], value: Callable[[Window], float]) -> float:
    return statistics.median(value(w) for w in windows)


def print_windows(title: str, windows: list[Window], log_extra_ms: float) -> None:
    print(f"{title} ({len(windows)} runs, medians over each measured run):")
    total = 0.0
    for source, label in (
        ("main", "pgdyno main thread (waits on pgbench)"),
        ("sampler", "pgdyno sampler thread"),
        ("other", "pgdyno other threads (progress refresh)"),
        ("server", "server backends of pgdyno's connections"),
    ):
        ms = median_of(windows, lambda w, s=source: w.cpu_ms[s] / w.seconds)
        total += ms
        extra = ""
        if source in windows[0].wakeups:
            wake = median_of(windows, lambda w, s=source: w.wakeups[s] / w.seconds)
            extra = f"{wake:6.1f} wake-ups/s"
        if source == "server":
            extra = f"{median_of(windows, lambda w: w.commits / w.seconds):6.1f} queries/s"
        print(row(label, ms, extra))
    print(row("pgbench's transaction log (its own work)", log_extra_ms))
    total += log_extra_ms
    print(row(f"total ({CPUS} CPUs = {1000 * CPUS} ms/s)", total))


@dataclass(frozen=True)
class LogCost:
    """pgbench's CPU per transaction (ns) without and with the run's log options."""

    client_only: tuple[float, float]  # on a script without SQL: the log's own work, exactly
    real: tuple[float, float]  # on the run's workload: what it adds there (noisier)


def log_cost(argv: list[str], workdir: Path, runs: int) -> LogCost:
    log = log_options(argv)
    with tempfile.TemporaryDirectory(prefix="pgdyno-cost-log-") as log_dir:
        plain = client_only(argv[0], argv[-1], with_log_in(log, Path(log_dir)), workdir)
        only = log_cost_ns(plain, runs)
    return LogCost(only, log_cost_ns(argv, runs))


def measure(
    args: argparse.Namespace,
) -> tuple[list[Window], list[Window], list[Window], LogCost, dict[str, float]]:
    with throwaway_sandbox("pgdyno-cost-") as (workdir, _binaries, box):
        seed = bench_argv(workdir, 3)  # sizes the latency sample of the runs that follow
        subprocess.run(seed, capture_output=True, check=True)
        piped: list[Window] = []
        tty: list[Window] = []
        no_waits: list[Window] = []
        with Client(box.conninfo("template1")) as monitor:
            for _ in range(args.runs):
                piped.append(watched_bench(workdir, args.seconds, monitor, tty=False))
                tty.append(watched_bench(workdir, args.seconds, monitor, tty=True))
                no_waits.append(watched_bench(workdir, args.seconds, monitor, tty=False, wait_hz=0))
        run = piped[-1].run
        cost = log_cost(list(run["pgbench_argv"]), workdir, args.runs)
        data = run["devices"].get("data") or {}
        devices = [data[k] for k in ("name", "disk") if isinstance(data.get(k), str)]
        parts = tick_parts(box, devices or None, args.ticks)
    return piped, tty, no_waits, cost, parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="pgdyno bench runs per display")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--ticks", type=int, default=200, help="sampler ticks taken apart")
    args = parser.parse_args()
    piped, tty, no_waits, cost, parts = measure(args)
    run = piped[-1].run
    tps = statistics.median(w.run["tps"] for w in piped)
    log_ms = (cost.client_only[1] - cost.client_only[0]) * tps / 1e6
    print(
        f"select-only, small scale, 2 clients, {args.seconds} s runs, {tps:,.0f} TPS; "
        f"latency log {run['latency_source']} ({' '.join(log_options(run['pgbench_argv']))})"
    )
    print_windows("pgdyno bench, stderr on a pipe", piped, log_ms)
    print_windows("pgdyno bench, stderr on a terminal", tty, log_ms)
    print_windows("pgdyno bench, stderr on a pipe, --wait-sample-hz 0", no_waits, log_ms)
    on = sum(median_of(piped, lambda w, s=s: w.cpu_ms[s] / w.seconds) for s in WAIT_PARTS)
    off = sum(median_of(no_waits, lambda w, s=s: w.cpu_ms[s] / w.seconds) for s in WAIT_PARTS)
    print(row(f"wait sampling at {DEFAULT_HZ} Hz (sampler thread + server, on - off)", on - off))
    (bare, logged), (real_bare, real_logged) = cost.client_only, cost.real
    print(
        f"pgbench's log, CPU per transaction: {logged - bare:+.0f} ns on a script without SQL "
        f"({bare:.0f} -> {logged:.0f} ns), {real_logged - real_bare:+.0f} ns on select-only "
        f"({real_bare:.0f} -> {real_logged:.0f} ns; moves with the machine's load)"
    )
    print(f"one sampler tick, taken apart ({args.ticks} ticks, CPU ms per tick = ms/s):")
    for name, ms in parts.items():
        print(row(name, ms))
    print(row("sum", sum(parts.values())))


if __name__ == "__main__":
    main()
