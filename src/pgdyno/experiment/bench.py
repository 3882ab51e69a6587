"""The bench runner: prepare datasets, run every cell of the matrix, store each run at once."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from pgdyno.collect.cpu_profile import unavailable, wanted
from pgdyno.collect.interference import server_pid
from pgdyno.collect.timeline import sampling_rate
from pgdyno.errors import (
    ConnectionFailed,
    DatasetError,
    Interrupted,
    ParseError,
    PgbenchFailed,
    RemoteFailed,
    RemoteUnavailable,
    SweepStopped,
)
from pgdyno.experiment.context import ProgressReporter, RunContext
from pgdyno.experiment.failure import Verdict, Where, failed_run
from pgdyno.experiment.matrix import BenchSpec, expand, seconds_per_run
from pgdyno.experiment.measure import Collect, MeasureRequest, measure
from pgdyno.experiment.rounds import Adaptive, RoundLog, RoundLoop
from pgdyno.experiment.schedule import InOrder, Schedule
from pgdyno.experiment.session import recorded_session
from pgdyno.experiment.target import Target
from pgdyno.experiment.tpcc_run import TpccMeter
from pgdyno.host.disks import backing_disks, device_names, free_disk_bytes, locate_devices
from pgdyno.host.machine import HostFacts
from pgdyno.host.perf import find_perf
from pgdyno.pgbench import execute
from pgdyno.pgbench.command import RunOptions, Workload
from pgdyno.pgbench.dataset import (
    Dataset,
    Generator,
    ensure_dataset,
    is_pristine,
    mark_in_use,
    prewarm,
    reset_bench_db,
)
from pgdyno.pgbench.driver import Driver, LocalDriver
from pgdyno.pgbench.scale import ScaleChoice, choose_scale
from pgdyno.postgres.client import Client, ServerInfo, connect, with_dbname
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.postgres.server import non_default_settings
from pgdyno.postgres.serverlog import log_end
from pgdyno.records import Event, RunCell, RunRecord
from pgdyno.records.devices import DeviceLayout
from pgdyno.stats.steady import default_trim
from pgdyno.stats.stopping import decide, level_interval
from pgdyno.tpcc.scripts import scripts_directory

# Every later run would fail the same way when the SSH connection to the server's host is gone.
LOST_HOST = Verdict(
    "the SSH connection to the server's host failed", "check the host and the network, then "
    "run again", fatal=True,
)  # fmt: skip


@dataclass(frozen=True)
class BenchOutcome:
    session_id: int
    records: list[tuple[int, RunRecord]]
    scales: list[ScaleChoice]
    datasets: list[Dataset]
    rounds: RoundLog | None = None  # adaptive rounds (--repeats auto): what they did and why


def resolve_scales(
    spec: BenchSpec, host: HostFacts, shared_buffers: int, data_path: Path | None
) -> list[ScaleChoice]:
    free = free_disk_bytes(data_path) if data_path is not None else None
    return [
        choose_scale(s, host.memory_bytes, shared_buffers, free, spec.dataset) for s in spec.scales
    ]


def one_cell(
    spec: BenchSpec, host: HostFacts, ready: Connected, log: Callable[[str], None]
) -> RunCell:
    """The one cell of a spec that measures a single cell (`noise`, `capacity`): its scale
    resolved against this server and host (a note said when it was changed)."""
    (choice,) = resolve_scales(spec, host, ready.info.shared_buffers_bytes, ready.data_path)
    if choice.note:
        log(choice.note)
    (cell,) = expand(spec, [choice.scale], host.cpu_count)
    return cell


# Parallel sessions of the TPC-C-like loader: one per CPU (the server generates the rows), at
# most one per warehouse.
def loader_sessions(warehouses: int) -> int:
    return max(1, min(warehouses, len(os.sched_getaffinity(0)), 8))


@dataclass
class Connected:
    """A target ready to run cells: connections, what to collect, the record every run starts
    from. Made by :func:`connected`; used by `bench` once and by `compare` once per set."""

    target: Target
    client: Client
    info: ServerInfo
    data_path: Path | None
    base: RunRecord
    runner: CellRunner
    pgbench: Path
    env: dict[str, str]
    datasets: dict[int, Dataset] = field(default_factory=dict)
    recorded: set[int] = field(default_factory=set)  # scales whose dataset a run recorded

    def dataset(self, scale: int, kind: str, progress: ProgressReporter) -> Dataset:
        """The template of this scale (warehouses for tpcc), reused or generated once."""
        if scale not in self.datasets:
            unit = "warehouses" if kind == "tpcc" else "scale"
            what = f"dataset {kind} {unit} {scale}"
            progress.phase(f"{what}: preparing")
            how = Generator(kind, self.pgbench, self.env, self.target.password,
                            loader_sessions(scale))  # fmt: skip
            self.datasets[scale] = ensure_dataset(self.client, scale, how)
            # Once per command: every set of a comparison connects anew and finds it again.
            progress.once(what, f"{what}: {dataset_done(self.datasets[scale])}")
        return self.datasets[scale]

    @property
    def server(self) -> dict[str, object]:
        """What a bench session records of the server it ran against."""
        return {
            "version": self.info.version, "version_num": self.info.version_num,
            "binaries": self.target.binaries.source,
            "pgbench_version": self.base.pgbench_version,
            "pgbench_host": self.runner.driver.host,  # "local", or the server's host over SSH
        }  # fmt: skip


def _perf(postmaster: int | None, ctx: RunContext) -> Path | None:
    """perf for the session's CPU profiles; None, said in one line, when it cannot run."""
    problem = unavailable(ctx.env, postmaster, remote=ctx.remote is not None)
    if problem is not None:
        ctx.log(problem)
        return None
    return find_perf(ctx.env)


@contextmanager
def connected(
    spec: BenchSpec, target: Target, host: HostFacts, ctx: RunContext
) -> Iterator[Connected]:
    child_env = target.child_env(ctx.env)
    log = ctx.log
    pgbench = target.binaries.tool("pgbench")
    with ExitStack() as stack:
        if ctx.server_lock is not None:  # held still, or again after a restart ended it
            ctx.server_lock.renew()
        client = stack.enter_context(connect(target.dsn, target.password))
        info = client.server_info()
        driver, pgbench_version = _driver(ctx, pgbench, info)
        if not (info.can_create_db or info.is_superuser):
            raise DatasetError(
                "the role in --dsn may not create databases, which pgdyno needs for its dataset "
                "copies: grant it CREATEDB or benchmark the sandbox."
            )
        data_path = data_path_of(target, info, ctx)
        if ctx.remote is not None:  # looked up in the remote host's copy of /proc and /sys
            there = Path(info.data_directory) if info.data_directory else None
            devices = ctx.remote.host.locate_devices(there)
        else:
            devices = locate_devices(data_path, ctx.proc_root, ctx.sys_root)
        if not devices.on_host:
            log(
                "disk metrics cover every device: the server's data directory is not on this "
                "host or is hidden from this role (it needs pg_read_all_settings)"
            )
        if target.server_log is None:
            log("checkpoint events not collected: the server log of an existing server is not "
                "read by pgdyno")  # fmt: skip
        stats_client = stack.enter_context(connect(target.dsn, target.password))
        postmaster = None if ctx.remote else server_pid(stats_client, target.dsn, ctx.proc_root)
        collect = Collect(
            proc_root=ctx.proc_root,
            devices=_sampled(devices, ctx),
            stats_client=stats_client,
            version_num=info.version_num,
            bench_db=BENCH_DB,
            server_log=target.server_log,
            cpus=host.cpu_count,
            keep_logs=ctx.keep_files,
            wait_hz=spec.wait_sample_hz,
            foreign_cpu_limit_pct=spec.foreign_cpu_limit_pct,
            server_pid=postmaster,
            remote=ctx.remote.host if ctx.remote else None,
            perf=_perf(postmaster, ctx) if wanted(spec.cpu_profile, ctx.env) else None,
        )
        if ctx.remote is not None:
            log(f"interference not measured: the process table of {ctx.remote.host.name} is "
                "not read")  # fmt: skip
        base = RunRecord(
            cell=RunCell(0, 0, "", 0, 0, 0), status="ok", started_at="", finished_at="",
            duration_s=spec.duration_s, protocol=spec.protocol, rate=spec.rate,
            warmup_s=spec.warmup_s, pg_version=info.version, pgbench_version=pgbench_version,
            pgbench_argv=(), settings=non_default_settings(client), dataset_bytes=None,
            devices=devices,
        )  # fmt: skip

        def expected_tps(cell: RunCell) -> float | None:
            return ctx.store.recent_tps(
                cell.workload, cell.scale, cell.clients, info.version,
                ctx.history_target or target.label,
            )  # fmt: skip

        where = Where(
            client, target.dsn, target.password, target.server_log, data_path, ctx.proc_root,
            ctx.sys_root,
        )  # fmt: skip
        runner = CellRunner(spec, target, client, collect, ctx, expected_tps, where)
        runner.driver = driver
        if spec.dataset == "tpcc":  # its scripts are rendered for this run of pgdyno
            scripts = scripts_directory(ctx.run_root)  # a SIGKILLed pgdyno's are removed
            stack.callback(shutil.rmtree, scripts, ignore_errors=True)
            runner.workloads = {w.name: w.with_scripts(scripts) for w in spec.workloads}
        yield Connected(target, client, info, data_path, base, runner, pgbench, child_env)


def data_path_of(target: Target, info: ServerInfo, ctx: RunContext) -> Path | None:
    """The server's data directory when it is on this host (its disk and postmaster.pid are
    read): the target's own, or the one the server reports when this host has it."""
    if target.data_path is not None or ctx.remote is not None:
        return target.data_path
    there = info.data_directory
    return Path(there) if there and Path(there).is_dir() else None


def _sampled(devices: DeviceLayout, ctx: RunContext) -> list[str] | None:
    """The devices the timeline samples: those under data and WAL, and for a loop device (a
    storage set's image) the disk its image is on."""
    names = device_names(devices)
    if names is None or ctx.remote is not None:
        return names
    return [*names, *backing_disks(names, ctx.proc_root, ctx.sys_root)]


def _driver(ctx: RunContext, pgbench: Path, info: ServerInfo) -> tuple[Driver, str]:
    """Where pgbench runs (here, or beside a remote server) and its version."""
    remote = ctx.remote
    if remote is not None:
        found = remote.host.driver(remote.dsn, info.version_num // 10000, remote.driver,
                                   remote.pgbench, ctx.log)  # fmt: skip
        if found is not None:
            return found, found.version
    return LocalDriver(pgbench), execute.version(pgbench)


def run_cells(
    ready: Connected,
    cells: list[RunCell],
    ctx: RunContext,
    *,
    session_id: int,
    watch: Callable[[], Callable[[], tuple[Event, ...]]] | None = None,
    **record_fields: object,
) -> list[tuple[int, RunRecord]]:
    """Run and store each cell in turn; `record_fields` go into every record (set_name, ...).
    `watch`, when given, is called as each run begins; what it returns is called as the run
    ends, and the events it gives are stored with the run (the idle twin servers' work).

    Raises Interrupted after storing the run that was cut short, and SweepStopped after storing
    a run that failed in a way every later run would too (server stopped, disk full).
    """
    records: list[tuple[int, RunRecord]] = []
    base = replace(ready.base, **record_fields)  # type: ignore[arg-type]
    progress = ctx.progress
    for cell in cells:
        kind = ready.runner.workloads[cell.workload].dataset
        dataset = ready.dataset(cell.scale, kind, progress)
        run_dir = ctx.run_root / f"session-{session_id}" / f"run-{cell.index + 1}"
        watched = watch() if watch is not None else None
        record, fatal = ready.runner.run(cell, replace(base, cell=cell), dataset, run_dir)
        if watched is not None:
            record = replace(record, events=(*record.events, *watched()))
        if cell.scale not in ready.recorded:  # the first run on a dataset keeps how it was made
            record = replace(record, events=(dataset.event(), *record.events))
            ready.recorded.add(cell.scale)
        if not ctx.keep_files:  # first: on a full disk, the run's files are what frees space
            shutil.rmtree(run_dir, ignore_errors=True)
        run_id = ctx.store.add_run(session_id, record)
        records.append((run_id, record))
        progress.finished(cell, record, run_id)
        if record.status == "interrupted":
            raise Interrupted("pgdyno was interrupted; the finished runs are saved.")
        if fatal is not None:
            raise SweepStopped(fatal.sweep_stopped(run_id, session_id))
    return records


def run_bench(
    spec: BenchSpec, target: Target, host: HostFacts, ctx: RunContext, *, command: list[str]
) -> BenchOutcome:
    with connected(spec, target, host, ctx) as ready:
        info = ready.info
        scales = resolve_scales(spec, host, info.shared_buffers_bytes, ready.data_path)
        for choice in scales:
            ctx.log(choice.note or choice.describe())
        server = ready.server
        sizes = [c.scale for c in scales]
        with recorded_session(ctx, command, target.label, host, server) as session_id:
            sweep = _BenchRounds(ready, spec, ctx, session_id)
            if spec.adaptive is None:  # one round: the whole matrix in run order
                cells = expand(spec, sizes, host.cpu_count)
                ctx.progress.planned(cells, seconds_per_run(spec))
                sweep.loop(cells, RoundLog(None), lambda _: True).run()
                rounds = None
            else:
                rounds = RoundLog(spec.adaptive)
                one = expand(spec.model_copy(update={"repeats": 1}), sizes, host.cpu_count)
                sweep.adaptive(spec.adaptive, one, rounds)
    return BenchOutcome(session_id, sweep.records, scales, list(ready.datasets.values()), rounds)


@dataclass
class _BenchRounds:
    """A bench's runs on the one run loop (`RoundLoop`): the cells of a round in the order
    given, each stored at once and kept in memory to judge the round."""

    ready: Connected
    spec: BenchSpec
    ctx: RunContext
    session_id: int
    records: list[tuple[int, RunRecord]] = field(default_factory=list)

    def loop(
        self, cells: list[RunCell], rounds: RoundLog, after: Callable[[int], bool]
    ) -> RoundLoop[RunCell]:
        return RoundLoop(Schedule(tuple(cells), InOrder()), rounds, self.run_one, after, _label)

    def run_one(self, cell: RunCell, round_no: int) -> None:
        if self.spec.adaptive is not None:  # every round again: numbered on, repeat = round
            cell = replace(cell, index=len(self.records), repeat=round_no)
        self.records.extend(run_cells(self.ready, [cell], self.ctx, session_id=self.session_id))

    def adaptive(self, adaptive: Adaptive, one: list[RunCell], rounds: RoundLog) -> None:
        """`bench --repeats auto`: rounds of every cell (`one`: each cell once) until each
        cell's mean TPS is known to the precision (an always-valid interval) or the budget is
        spent."""
        most = adaptive.most_rounds(seconds_per_run(self.spec) * len(one))
        self.ctx.progress.planned(
            [replace(c, index=r * len(one) + c.index, repeat=r + 1)
             for r in range(most) for c in one],
            seconds_per_run(self.spec),
        )  # fmt: skip

        def after(round_no: int) -> bool:
            levels = [level_interval(tps) for tps in _usable_tps(one, self.records)]
            rounds.decision = decide(
                levels, precision_pct=adaptive.precision_pct, rounds=round_no,
                elapsed_s=rounds.elapsed_s, round_s=rounds.round_s, budget_s=adaptive.budget_s,
            )  # fmt: skip
            return rounds.decision.stop

        self.loop(one, rounds, after).run()


def _label(cell: RunCell) -> str:
    return f"{cell.workload} s{cell.scale} c{cell.clients}"


def _usable_tps(cells: list[RunCell], records: list[tuple[int, RunRecord]]) -> list[list[float]]:
    """Per cell of a round, the TPS of its runs that finished and were not interfered with
    (an empty list for a cell with none yet: unresolved)."""
    by_cell: dict[tuple[str, int, int], list[float]] = {
        (c.workload, c.scale, c.clients): [] for c in cells
    }
    for _, record in records:
        tps = record.throughput  # NOPM for the TPC-C-like workload
        if record.status == "ok" and tps > 0 and record.interference is None:
            by_cell[(record.cell.workload, record.cell.scale, record.cell.clients)].append(tps)
    return list(by_cell.values())


def dataset_done(dataset: Dataset) -> str:
    """What was done to have a dataset ready, for the one line said about it.

    >>> dataset_done(Dataset("pgdyno_tpl_s1", 1, 23 << 20, True, 3.21))
    'generated (23 MiB, 3.2 s)'
    >>> dataset_done(Dataset("pgdyno_tpl_s1", 1, 23 << 20, False, 0.01))
    'reused (23 MiB, template pgdyno_tpl_s1)'
    """
    size = f"{dataset.size_bytes / 1024**2:,.0f} MiB"
    if dataset.generated:
        return f"generated ({size}, {dataset.prepare_seconds:.1f} s)"
    return f"reused ({size}, template {dataset.template})"


# -- One cell: a fresh copy of the dataset, the probe or warm-up, the measured run ----------------

# Seconds of the probe that sizes the first run's latency sample; never longer than the run
# itself (a 1 s run logging every transaction costs less than a 3 s probe).
PROBE_S = 3
# Every later run would fail the same way when the SSH connection to the server's host is gone.
LOST_HOST = Verdict(
    "the SSH connection to the server's host failed", "check the host and the network, then "
    "run again", fatal=True,
)  # fmt: skip


class CellRunner:
    """Runs one cell: fresh dataset copy when needed, warm-up, measured run."""

    def __init__(
        self,
        spec: BenchSpec,
        target: Target,
        client: Client,
        collect: Collect,
        ctx: RunContext,
        expected_tps: Callable[[RunCell], float | None],
        where: Where,
    ) -> None:
        self.spec = spec
        self.where = where
        self.client = client
        self.collect = collect
        self.driver: Driver = LocalDriver(target.binaries.tool("pgbench"))
        self.env = target.child_env(ctx.env)
        self.progress: ProgressReporter = ctx.progress
        self.log = ctx.log
        self.clock = ctx.clock
        self.expected_tps = expected_tps
        self.bench_dsn = with_dbname(target.dsn, BENCH_DB)
        self.password = target.password
        self.workloads: dict[str, Workload] = {w.name: w for w in spec.workloads}
        # --max-tries came with pgbench 15: older ones run each transaction once.
        self.retries = target.binaries.major >= 15
        self.tpcc = TpccMeter(client, self.bench_dsn, target.password, ctx.log)

    def _sampling_rate(self, cell: RunCell, warmup_tps: float | None) -> float:
        mode = self.spec.latency_log
        if mode == "full":
            return 1.0
        if mode != "auto":
            return float(mode)
        return sampling_rate(warmup_tps or self.expected_tps(cell))

    def unmeasured(self, opts: RunOptions, cell: RunCell, seconds: int, run_dir: Path) -> float:
        """Run pgbench without any log for `seconds` (a warm-up or a probe); its TPS."""
        done = self.driver.execute(
            self.driver.argv(self.bench_dsn, replace(opts, duration_s=seconds), None,
                             scale=cell.scale),
            run_dir=run_dir, duration_s=seconds, env=self.env,
            on_tick=lambda t: self.progress.tick(cell, t),
        )  # fmt: skip
        return done.summary.tps

    def _needs_probe(self, cell: RunCell) -> bool:
        """With nothing to size the latency sample from, a short probe measures the rate:
        logging every transaction of a 50k TPS run would cost more than the probe."""
        return (
            self.spec.latency_log == "auto"
            and not self.spec.warmup_s
            and self.expected_tps(cell) is None
        )

    def fresh_copy(self, cell: RunCell, dataset: Dataset, *, may_write: bool) -> None:
        """Every run starts from an untouched copy of the dataset."""
        if not is_pristine(self.client, dataset.template):
            self.progress.phase(f"copying dataset scale {cell.scale}")
            reset_bench_db(self.client, dataset.template, self.collect.version_num)
        if may_write:
            mark_in_use(self.client)

    def run(
        self, cell: RunCell, record: RunRecord, dataset: Dataset, run_dir: Path
    ) -> tuple[RunRecord, Verdict | None]:
        """The run's record, and the verdict when it failed in a way that ends the sweep."""
        log_mark = log_end(self.where.server_log)
        workload = self.workloads[cell.workload]
        opts = RunOptions(
            workload, cell.clients, cell.jobs, self.spec.duration_s, self.spec.protocol,
            self.spec.rate, self.spec.latency_limit_ms, self.spec.per_statement,
            self.spec.progress, workload.max_tries if self.retries else 1,
        )  # fmt: skip
        record = replace(record, started_at=self.clock(), dataset_bytes=dataset.size_bytes)
        try:
            self.fresh_copy(cell, dataset, may_write=workload.may_write)
            probe_tps = None
            if self._needs_probe(cell):
                self.progress.phase("probing the transaction rate")
                probe_s = min(PROBE_S, self.spec.duration_s)
                probe_tps = self.unmeasured(opts, cell, probe_s, run_dir / "probe")
                if workload.may_write:  # the probe changed the copy: the run starts afresh
                    self.fresh_copy(cell, dataset, may_write=True)
            if self.spec.prewarm:
                self.progress.phase("prewarming")
                prewarm(self.bench_dsn, self.password)
            offset, warmup_tps = 0.0, None
            if self.spec.warmup_s:
                self.progress.phase("warming up")
                warmup_tps = self.unmeasured(opts, cell, self.spec.warmup_s, run_dir / "warmup")
                offset = float(self.spec.warmup_s)
            rate = self._sampling_rate(cell, warmup_tps or probe_tps)
            record = replace(
                record,
                pgbench_argv=tuple(
                    self.driver.argv(self.bench_dsn, opts, run_dir / "tx",
                                     sampling_rate=rate, scale=cell.scale)
                ),
            )  # fmt: skip
            self.progress.phase("running")
            trim_s = self.spec.trim_s
            request = MeasureRequest(
                self.driver, self.bench_dsn, opts, cell.scale, rate,
                default_trim(self.spec.duration_s, self.spec.warmup_s) if trim_s is None
                else trim_s,
                run_dir, self.env,
            )  # fmt: skip
            before = self.tpcc.before() if workload.tpcc is not None else None
            measured = measure(
                request, self.collect,
                on_tick=lambda t: self.progress.tick(cell, offset + t), log=self.log,
            )  # fmt: skip
            if before is not None:
                self.progress.phase("checking consistency")
                measured = self.tpcc.figures(
                    cell.scale, workload, before, measured, float(self.spec.duration_s)
                )
        except (KeyboardInterrupt, Interrupted):
            return replace(
                record, status="interrupted", finished_at=self.clock(),
                error="interrupted before the run finished",
            ), None  # fmt: skip
        except (PgbenchFailed, ConnectionFailed, ParseError, OSError) as exc:
            return failed_run(self.where, record, exc, log_mark, run_dir, clock=self.clock)
        except (RemoteUnavailable, RemoteFailed) as exc:  # the server's host, over SSH
            failed = replace(record, status="failed", finished_at=self.clock(), error=str(exc))
            return failed, LOST_HOST
        record = replace(
            record, finished_at=self.clock(), summary=measured.summary, seconds=measured.seconds,
            latency=measured.latency, latency_source=measured.latency_source,
            samples=measured.samples, events=measured.events,
            health=measured.health, interference=measured.interference, tpcc=measured.tpcc,
            waits=measured.waits, profile=measured.profile,
        )  # fmt: skip
        if measured.tpcc is not None and not measured.tpcc.consistent:
            # The data the run left breaks the specification's invariants: its figures are
            # not to be trusted (a bug, or a server that lost writes).
            record = replace(
                record, status="failed",
                error=f"the TPC-C-like consistency check failed: {measured.tpcc.consistency}",
            )  # fmt: skip
        return record, None
