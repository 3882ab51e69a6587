"""One cell of a bench or compare: a fresh copy of the dataset, the probe or warm-up, the
measured run, and its record (failed with the reason when it fails)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pgdyno.collect.timeline import sampling_rate
from pgdyno.errors import (
    ConnectionFailed,
    Interrupted,
    ParseError,
    PgbenchFailed,
    RemoteFailed,
    RemoteUnavailable,
)
from pgdyno.experiment.context import ProgressReporter, RunContext
from pgdyno.experiment.failure import Verdict, Where, failed_run
from pgdyno.experiment.matrix import BenchSpec
from pgdyno.experiment.measure import Collect, MeasureRequest, measure
from pgdyno.experiment.target import Target
from pgdyno.experiment.tpcc_run import TpccMeter
from pgdyno.pgbench.command import RunOptions, Workload
from pgdyno.pgbench.dataset import Dataset, is_pristine, mark_in_use, prewarm, reset_bench_db
from pgdyno.pgbench.driver import Driver, LocalDriver
from pgdyno.postgres.client import Client, with_dbname
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.postgres.serverlog import log_end
from pgdyno.records import RunCell, RunRecord
from pgdyno.stats.steady import default_trim

PROBE_S = 3  # seconds of the probe that sizes the first run's latency sample
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

    def _unmeasured(self, opts: RunOptions, cell: RunCell, seconds: int, run_dir: Path) -> float:
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

    def _fresh_copy(self, cell: RunCell, dataset: Dataset, *, may_write: bool) -> None:
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
            self._fresh_copy(cell, dataset, may_write=workload.may_write)
            probe_tps = None
            if self._needs_probe(cell):
                self.progress.phase("probing the transaction rate")
                probe_tps = self._unmeasured(opts, cell, PROBE_S, run_dir / "probe")
                if workload.may_write:  # the probe changed the copy: the run starts afresh
                    self._fresh_copy(cell, dataset, may_write=True)
            if self.spec.prewarm:
                self.progress.phase("prewarming")
                prewarm(self.bench_dsn, self.password)
            offset, warmup_tps = 0.0, None
            if self.spec.warmup_s:
                self.progress.phase("warming up")
                warmup_tps = self._unmeasured(opts, cell, self.spec.warmup_s, run_dir / "warmup")
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
            waits=measured.waits,
        )  # fmt: skip
        if measured.tpcc is not None and not measured.tpcc.consistent:
            # The data the run left breaks the specification's invariants: its figures are
            # not to be trusted (a bug, or a server that lost writes).
            record = replace(
                record, status="failed",
                error=f"the TPC-C-like consistency check failed: {measured.tpcc.consistency}",
            )  # fmt: skip
        return record, None
