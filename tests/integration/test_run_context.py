"""The run context: its injected clock, not the live one, stamps when each run started and ended."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from conftest import make_env
from pgdyno.cli.progress import MatrixProgress
from pgdyno.experiment.bench import run_bench
from pgdyno.experiment.context import RunContext
from pgdyno.experiment.matrix import make_spec
from pgdyno.experiment.target import sandbox_as_target
from pgdyno.host.machine import read_host
from pgdyno.pgbench.command import builtin_workload
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox
from pgdyno.results.store import ResultsStore


def test_runs_are_stamped_by_the_context_clock(
    box: Sandbox, workdir: Path, cache_dir: Path, binaries: Binaries
) -> None:
    env = make_env(workdir, cache_dir)
    stamps = iter(["2031-01-02T03:04:05.000+00:00", "2031-01-02T03:04:09.000+00:00"])
    spec = make_spec(
        workloads=[builtin_workload("select-only")], scales=[1], clients=[1], duration_s=1,
        latency_log="full",
    )  # fmt: skip
    with (
        ResultsStore(env.results.path) as store,
        MatrixProgress(Console(file=io.StringIO())) as progress,
    ):
        ctx = RunContext.of(
            env, store, log=lambda _: None, progress=progress, keep_files=False,
            clock=lambda: next(stamps),
        )  # fmt: skip
        host = read_host(ctx.proc_root, ctx.sys_root)
        outcome = run_bench(spec, sandbox_as_target(box), host, ctx, command=["pgdyno", "test"])
    [(_run_id, record)] = outcome.records
    assert record.status == "ok", record.error
    assert (record.started_at, record.finished_at) == (
        "2031-01-02T03:04:05.000+00:00",
        "2031-01-02T03:04:09.000+00:00",
    )
