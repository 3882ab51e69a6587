"""One benchmark run as frozen records: its cell, its per-second rows, events, samples, result."""

from __future__ import annotations

from dataclasses import dataclass, field

from pgdyno.records.devices import DeviceLayout
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.pgbench import Summary
from pgdyno.records.profile import CpuProfile
from pgdyno.records.tpcc import TpccResult
from pgdyno.records.waits import WaitProfile

Sample = tuple[int, str, float]  # (epoch second, metric, value): one point of a series


@dataclass(frozen=True)
class RunCell:
    """One cell of a bench matrix, one repeat."""

    index: int  # position in the matrix, 0-based
    scale: int
    workload: str
    clients: int
    jobs: int
    repeat: int  # 1-based


@dataclass(frozen=True, slots=True)
class SecondRow:
    """One second of a run: pgbench's throughput and latency, on the wall clock."""

    t: int  # epoch second the interval starts
    tps: float
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    latency_min_ms: float | None = None
    latency_max_ms: float | None = None
    failures: int = 0
    lag_avg_ms: float | None = None
    skipped: int = 0
    latency_p50_ms: float | None = None
    latency_p90_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_p999_ms: float | None = None
    logged: int | None = None  # transactions behind the percentiles (sampled logs: fewer)


@dataclass(frozen=True, slots=True)
class Event:
    t: float  # epoch seconds
    kind: str  # checkpoint_start, checkpoint_complete, ...
    detail: dict[str, object]


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None
    p95_ms: float | None = None  # kept in memory for capacity steps; runs store p50/p90/p99


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
    seconds: tuple[SecondRow, ...] = ()
    error: str | None = None
    stderr: str | None = None
    latency: Percentiles | None = None  # over the measured window
    latency_source: str | None = None
    samples: tuple[Sample, ...] = ()
    events: tuple[Event, ...] = ()
    health: RunHealth = field(default_factory=RunHealth)  # RunHealth(): not assessed
    # The data and WAL devices (host/disks.py); DeviceLayout() when the server's
    # data directory is not on this host.
    devices: DeviceLayout = field(default_factory=DeviceLayout)
    comparison_id: int | None = None  # set when the run belongs to `pgdyno compare`
    set_name: str | None = None
    # Foreign CPU and steal when they exceeded a threshold (collect/interference.py);
    # None: a clean run, or one not measured.
    interference: Interference | None = None
    tpcc: TpccResult | None = None  # the TPC-C-like workload's figures (NOPM, TPM, per type)
    waits: WaitProfile | None = None  # the wait-event profile; None: not sampled
    profile: CpuProfile | None = None  # the on-CPU profile (perf); None: not taken

    @property
    def throughput(self) -> float:
        """The figure a run is judged by: NOPM for the TPC-C-like workload, else TPS; 0 when
        the run measured none."""
        if self.tpcc is not None:
            return self.tpcc.nopm
        return self.summary.tps if self.summary is not None else 0.0
