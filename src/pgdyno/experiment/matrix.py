"""The bench matrix: what to run, validated, and expanded into ordered cells (pure)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pgdyno.errors import UsageError
from pgdyno.pgbench.command import Workload, jobs_for
from pgdyno.records import RunCell


class BenchSpec(BaseModel):
    """Everything `pgdyno bench` was asked to do."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    workloads: Annotated[list[Workload], Field(min_length=1)]
    scales: Annotated[list[str | int], Field(min_length=1)]
    clients: Annotated[list[Annotated[int, Field(ge=1, le=10000)]], Field(min_length=1)]
    jobs: str = "auto"
    duration_s: Annotated[int, Field(ge=1, le=7 * 86400)] = 60
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    rate: Annotated[float, Field(gt=0)] | None = None
    latency_limit_ms: Annotated[float, Field(gt=0)] | None = None
    repeats: Annotated[int, Field(ge=1, le=1000)] = 1
    warmup_s: Annotated[int, Field(ge=0, le=86400)] = 0
    trim_s: Annotated[int, Field(ge=0, le=86400)] | None = None  # None: default_trim()
    # auto (sample to ~2000 logged transactions a second), full, or a rate in (0, 1]
    latency_log: Annotated[str, Field(pattern=r"^(auto|full|0?\.\d+|1(\.0*)?)$")] = "auto"
    # Read the dataset into shared buffers with pg_prewarm before each run's warm-up.
    prewarm: bool = False
    per_statement: bool = False  # pgbench -r
    progress: bool = False  # pgbench -P 1, kept as the series pgbench.progress_tps


_OPTION = {
    "duration_s": "-T/--time",
    "repeats": "--repeats",
    "warmup_s": "--warmup",
    "rate": "-R/--rate",
    "latency_limit_ms": "-L/--latency-limit",
    "clients": "-c/--clients",
    "protocol": "-M/--protocol",
    "trim_s": "--trim",
    "latency_log": "--latency-log",
}


def make_spec(**fields: object) -> BenchSpec:
    """Validate bench options; the first problem becomes one sentence naming the option."""
    try:
        return BenchSpec(**fields)  # type: ignore[arg-type]
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "options"
        raise UsageError(
            f"{_OPTION.get(field, field)}: {error['msg'].lower()} (got {error.get('input')!r})."
        ) from None


def expand(spec: BenchSpec, scales: list[int], cpus: int) -> list[RunCell]:
    """Cells in run order: scale, then workload, then repeat, then clients.

    Runs of one scale share a dataset; a repeat sweeps all client counts before the next
    repeat starts, so slow drift spreads across the sweep instead of landing on one count.

    >>> from pgdyno.pgbench.command import builtin_workload
    >>> s = make_spec(workloads=[builtin_workload("select-only")], scales=[1], clients=[1, 4],
    ...               repeats=2)
    >>> [(c.clients, c.jobs, c.repeat) for c in expand(s, [1], cpus=2)]
    [(1, 1, 1), (4, 2, 1), (1, 1, 2), (4, 2, 2)]
    """
    cells: list[RunCell] = []
    for scale in scales:
        for workload in spec.workloads:
            for repeat in range(1, spec.repeats + 1):
                for clients in spec.clients:
                    cells.append(
                        RunCell(
                            index=len(cells),
                            scale=scale,
                            workload=workload.name,
                            clients=clients,
                            jobs=jobs_for(clients, spec.jobs, cpus),
                            repeat=repeat,
                        )
                    )
    return cells
