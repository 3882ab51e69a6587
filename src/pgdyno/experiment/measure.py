"""One measured pgbench run with everything collected beside it, on one clock."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pgdyno.collect.cpu_profile import CpuProfiler, ProfileData
from pgdyno.collect.interference import (
    FOREIGN_CPU_MAX_PCT,
    ProcessTable,
    flagged_interference,
    read_processes,
)
from pgdyno.collect.pgstats import PgStatsSampler
from pgdyno.collect.procfs import ProcReader
from pgdyno.collect.sampler import OsSource, Timeline, TimelineSampler
from pgdyno.collect.timeline import (
    latency_source,
    progress_samples,
    run_percentiles,
    second_rows,
)
from pgdyno.collect.waits import DEFAULT_HZ, Key, WaitTally
from pgdyno.errors import ParseError
from pgdyno.pgbench.command import RunOptions
from pgdyno.pgbench.driver import Driver
from pgdyno.pgbench.execute import PgbenchResult
from pgdyno.pgbench.output import Summary
from pgdyno.pgbench.progress import parse_progress
from pgdyno.pgbench.txlog import LatencySummary, summarize
from pgdyno.postgres.client import Client
from pgdyno.postgres.serverlog import LogTail
from pgdyno.records import Event, Percentiles, Sample, SecondRow
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.profile import CpuProfile
from pgdyno.records.scripts import ScriptLatency
from pgdyno.records.tpcc import TpccResult
from pgdyno.records.waits import WaitProfile
from pgdyno.remote.host import RemoteHost
from pgdyno.stats.cpu_profile import cpu_profile, symbols_missing
from pgdyno.stats.steady import assess, client_capacity_pct
from pgdyno.stats.waits import TOP_EVENT_SERIES, profile, second_samples, top_event_samples


@dataclass(frozen=True)
class Collect:
    """What to collect beside pgbench, fixed for a whole bench session."""

    proc_root: Path
    devices: Sequence[str] | None  # block devices to sample; None: all
    stats_client: Client | None  # a connection of its own for the PostgreSQL sampler
    version_num: int
    bench_db: str
    server_log: Path | None  # the sandbox's log, for checkpoint events
    cpus: int
    keep_logs: bool = False
    # The server's postmaster when it runs on this host: its processes are part of the
    # experiment, not interference (collect/interference.py). None: unknown or remote.
    server_pid: int | None = None
    # The host's OS counters come from over SSH (its process table is not read: no
    # interference check); None: this host's.
    remote: RemoteHost | None = None
    # Looks a second at the server's sessions for the wait-event profile (collect/waits.py);
    # 0: none.
    wait_hz: int = DEFAULT_HZ
    # A run is flagged when other processes took more of the machine's CPU (in %).
    foreign_cpu_limit_pct: float = FOREIGN_CPU_MAX_PCT
    # perf, when the server's processes are sampled for the on-CPU profile (needs
    # `server_pid`; collect/cpu_profile.py); None: no profile.
    perf: Path | None = None


@dataclass(frozen=True)
class MeasureRequest:
    """One measured pgbench run to make: what to run, where its files go, how its latency log
    is sampled and how much of its start is trimmed before judging its health."""

    driver: Driver  # where pgbench runs
    dsn: str
    opts: RunOptions
    scale: int
    sampling_rate: float  # of the per-transaction log
    trim_s: int
    run_dir: Path
    env: Mapping[str, str]  # pgbench's environment


@dataclass(frozen=True)
class Measured:
    summary: Summary
    seconds: tuple[SecondRow, ...]
    latency: Percentiles | None
    latency_source: str
    samples: tuple[Sample, ...]
    events: tuple[Event, ...]
    health: RunHealth
    interference: Interference | None = None  # None: a clean run, or not measured
    # Per script of a multi-script run (-f a@45 -f b@43 ...): the whole run's figures, and
    # per second (epoch second, successful transactions of each script); () for one script.
    scripts: tuple[ScriptLatency, ...] = ()
    script_counts: tuple[tuple[int, tuple[int, ...]], ...] = ()
    tpcc: TpccResult | None = None  # the TPC-C-like workload's figures (experiment/tpcc_run.py)
    waits: WaitProfile | None = None  # None: not sampled
    profile: CpuProfile | None = None  # the on-CPU profile; None: not taken


LIVE_PROC = Path("/proc")  # pgbench's own CPU, when it runs on this host and the OS is remote
PROCESS_TABLE_WAIT_S = 5.0  # a read of /proc that takes longer has hung (a broken procfs)


def process_table(collect: Collect, log: Callable[[str], None]) -> ProcessTable | None:
    """The process table for interference; a run never fails, nor hangs, for want of it.

    Read on a daemon thread: a /proc read that never returns (as the sampler's hang test
    makes one) must not hold the run, and an abandoned daemon thread does not hold the exit.
    """
    found: list[ProcessTable | Exception] = []

    def read() -> None:
        try:
            found.append(read_processes(collect.proc_root))
        except (OSError, ParseError) as exc:
            found.append(exc)

    reader = threading.Thread(target=read, name="pgdyno-process-table", daemon=True)
    reader.start()
    reader.join(PROCESS_TABLE_WAIT_S)
    if not found:
        log(f"interference not measured: reading {collect.proc_root} did not return within "
            f"{PROCESS_TABLE_WAIT_S:.0f} s")  # fmt: skip
        return None
    if isinstance(found[0], Exception):
        log(f"interference not measured: the process table could not be read ({found[0]})")
        return None
    return found[0]


def interference_between(
    before: ProcessTable | None, after: ProcessTable | None, collect: Collect
) -> Interference | None:
    if before is None or after is None:
        return None
    roots = [os.getpid()] + ([collect.server_pid] if collect.server_pid else [])
    return flagged_interference(
        before, after, roots, collect.cpus, after.at - before.at,
        foreign_limit_pct=collect.foreign_cpu_limit_pct,
    )  # fmt: skip


def _clock_offset(collect: Collect, at: float) -> list[Event]:
    """On a remote host, the clock offset its series were corrected by (and its error bound)."""
    if collect.remote is None:
        return []
    return [Event(at, "clock_offset", {"host": collect.remote.name,
                                       **collect.remote.offset.as_detail()})]  # fmt: skip


@dataclass(frozen=True)
class Collected:
    """What one pgbench run left, read and not yet summarised: pgbench's result, its
    per-transaction log as per-second rows and a total (on this host's clock), the timeline
    sampled beside it, the foreign CPU over it, the wait-event tally and, for a remote host,
    the clock offset its series were corrected by. `summarized` turns it into a `Measured`
    without touching anything outside, so the summary is tested on recorded data."""

    result: PgbenchResult
    per_second: tuple[LatencySummary, ...]
    total: LatencySummary
    timeline: Timeline
    interference: Interference | None
    waits: WaitTally | None
    clock_events: tuple[Event, ...] = ()
    profile: ProfileData | None = None


def measure(
    request: MeasureRequest,
    collect: Collect,
    *,
    on_tick: Callable[[float], None],
    log: Callable[[str], None],
) -> Measured:
    """Run pgbench with everything collected beside it (`collected`), then summarise it."""
    found = collected(request, collect, on_tick=on_tick, log=log)
    return summarized(found, request.opts, request.trim_s, request.sampling_rate, collect.cpus)


def collected(
    request: MeasureRequest,
    collect: Collect,
    *,
    on_tick: Callable[[float], None],
    log: Callable[[str], None],
    on_sampler: Callable[[TimelineSampler], None] | None = None,
) -> Collected:
    """The I/O of a run: pgbench executed with the samplers running, its logs read (and
    deleted unless kept), the process table read before and after. `on_sampler` is handed
    the timeline sampler as it starts (a switched run stores each period as it ends, from
    what the sampler holds then: `TimelineSampler.so_far`)."""
    opts, run_dir, sampling_rate = request.opts, request.run_dir, request.sampling_rate
    driver = request.driver
    argv = driver.argv(request.dsn, opts, run_dir / "tx", sampling_rate=sampling_rate,
                       scale=request.scale)  # fmt: skip
    remote = collect.remote.proc(collect.devices) if collect.remote else None
    sampler = _timeline_sampler(collect, remote, driver.host == "local", log)
    waits = sampler.waits
    processes_before = process_table(collect, log) if remote is None else None
    profiler = _profiler(collect, run_dir, log)
    if remote is not None:
        remote.start()
    if profiler is not None:
        profiler.start()
    sampler.start()
    if on_sampler is not None:
        on_sampler(sampler)
    try:
        result = driver.execute(
            argv, run_dir=run_dir, duration_s=opts.duration_s, env=request.env, on_tick=on_tick,
            on_spawn=sampler.watch_pid,
        )  # fmt: skip
    except BaseException:  # interrupted or failed: perf ended, its samples not read
        if profiler is not None:
            profiler.abort()
        raise
    finally:
        timeline = sampler.stop()
        if remote is not None:
            remote.stop()
    profile = _profile_read(profiler, collect.keep_logs, log)
    after = process_table(collect, log) if remote is None else None
    interference = interference_between(processes_before, after, collect)
    per_second, total = _read_logs(request, collect.keep_logs)
    return Collected(
        result, tuple(per_second), total, timeline, interference,
        waits.tally if waits else None, tuple(_clock_offset(collect, result.started_at)),
        profile,
    )  # fmt: skip


def _timeline_sampler(
    collect: Collect, remote: OsSource | None, pgbench_here: bool, log: Callable[[str], None]
) -> TimelineSampler:
    pg = None
    if collect.stats_client is not None:
        pg = PgStatsSampler(
            collect.stats_client, collect.version_num, collect.bench_db, log, collect.wait_hz
        )
    return TimelineSampler(
        log=log,
        proc_root=collect.proc_root,
        devices=collect.devices,
        pg=pg,
        server_log=LogTail(collect.server_log) if collect.server_log else None,
        os_source=remote,
        # pgbench's CPU is read on the host it runs on: here, or beside a remote server
        client_source=ProcReader(LIVE_PROC) if remote and pgbench_here else None,
    )


def _read_logs(request: MeasureRequest, keep: bool) -> tuple[list[LatencySummary], LatencySummary]:
    """pgbench's logs of the run summarised (deleted unless kept), on this host's clock."""
    opts, driver = request.opts, request.driver
    logs = sorted(request.run_dir.glob("tx.*"))
    per_second, total = summarize(
        logs, request.sampling_rate, with_lag=opts.rate is not None,
        with_retries=opts.max_tries != 1, scripts=len(opts.workload.scripts),
    )  # fmt: skip
    if driver.log_clock_shift_s:  # a remote pgbench stamps its log with the remote clock
        shift = driver.log_clock_shift_s
        per_second = [replace(r, t=None if r.t is None else r.t + shift) for r in per_second]
    if not keep:
        for path in logs:
            path.unlink(missing_ok=True)
    return per_second, total


def _profile_read(
    profiler: CpuProfiler | None, keep_files: bool, log: Callable[[str], None]
) -> ProfileData | None:
    """perf stopped after a run that ended well, and its samples read."""
    if profiler is None:
        return None
    found = profiler.stop(keep_files=keep_files)
    if found is not None and symbols_missing(found.samples):
        log("CPU profile: the server's postgres binary has no symbols, so its functions are "
            "named by file only")  # fmt: skip
    return found


def _profiler(collect: Collect, run_dir: Path, log: Callable[[str], None]) -> CpuProfiler | None:
    if collect.perf is None or collect.server_pid is None or collect.remote is not None:
        return None
    return CpuProfiler(collect.perf, collect.server_pid, run_dir, log=log)


def summarized(
    found: Collected, opts: RunOptions, trim_s: int, sampling_rate: float, cpus: int
) -> Measured:
    """The run's figures from what was collected: per-second rows, percentiles, the wait
    profile, pgbench's own progress series, and its health (steady state, pgbench's CPU,
    lag, the series cut short, other processes). Pure."""
    result, per_second, total = found.result, found.per_second, found.total
    timeline = found.timeline
    rows = second_rows(list(per_second), total, result.summary.transactions or total.transactions)
    wait_samples, wait_profile = _waits(found.waits, rows)
    progress = progress_samples(parse_progress(result.stderr), result.started_at)
    lags = [r.lag_avg_ms for r in rows if r.lag_avg_ms is not None]
    health = assess(
        [r.tps for r in rows], trim_s,
        client_cpu_pct=timeline.client_cpu_pct,
        client_capacity_pct=client_capacity_pct(opts.jobs, cpus),
        lag_avg_ms=sum(lags) / len(lags) if lags else None,
        skipped=result.summary.skipped_transactions or 0, rate=opts.rate,
    )  # fmt: skip
    # A series cut short is part of the run's story: flagged in its health, not only logged.
    health = replace(health, warnings=(*health.warnings, *timeline.gaps))
    interference = found.interference
    if interference is not None:
        health = replace(health, warnings=(*health.warnings, interference.warning()))
    summary = result.summary
    if summary.latency_stddev_ms is None and total.stddev_ms is not None:
        # pgbench prints it only with -P, -R or -L; the log gives the same figure.
        summary = replace(summary, latency_stddev_ms=total.stddev_ms)
    return Measured(
        summary=summary,
        seconds=tuple(rows),
        latency=run_percentiles(total) if total.logged else None,
        latency_source=latency_source(sampling_rate),
        samples=(*timeline.samples, *progress, *wait_samples),
        events=(*timeline.events, *found.clock_events),
        health=health,
        interference=interference,
        scripts=total.by_script,
        script_counts=tuple((r.t, r.script_counts) for r in per_second if r.t is not None),
        waits=wait_profile,
        profile=_cpu_profile(found.profile),
    )


def _cpu_profile(found: ProfileData | None) -> CpuProfile | None:
    if found is None:
        return None
    return cpu_profile(found.samples, found.types, found.sample_hz)


def _waits(
    tally: WaitTally | None, rows: Sequence[SecondRow]
) -> tuple[list[Sample], WaitProfile | None]:
    """The wait series and profile of the measured window: the whole seconds pgbench's log
    covers (the sampler's first looks come before any session connects)."""
    if tally is None:
        return [], None
    ticks = tally.ticks
    if rows:
        first, last = rows[0].t, rows[-1].t
        ticks = {t: n for t, n in ticks.items() if first <= t <= last}
    # the same window for all of it
    counts: dict[int, Counter[Key]] = {t: tally.counts.get(t, Counter()) for t in ticks}
    found = profile(ticks, counts, tally.source, tally.hz)
    top = [w.event for w in found.top[:TOP_EVENT_SERIES]] if found else []
    return second_samples(ticks, counts) + top_event_samples(ticks, counts, top), found
