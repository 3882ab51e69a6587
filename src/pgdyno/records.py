"""Frozen records that flow from collectors to the store and the renderers."""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.pgbench.logs import Second
from pgdyno.pgbench.output import Summary


@dataclass(frozen=True)
class RunCell:
    """One cell of a bench matrix, one repeat."""

    index: int  # position in the matrix, 0-based
    scale: int
    workload: str
    clients: int
    jobs: int
    repeat: int  # 1-based


@dataclass(frozen=True)
class RunRecord:
    cell: RunCell
    status: str  # ok / failed / interrupted
    started_at: str
    finished_at: str
    duration_s: int
    protocol: str
    rate: float | None
    warmup_s: int
    pg_version: str
    pgbench_version: str
    pgbench_argv: tuple[str, ...]
    settings: dict[str, str]
    dataset_bytes: int | None
    summary: Summary | None = None
    seconds: tuple[Second, ...] = ()
    error: str | None = None
    stderr: str | None = None
