"""What the results store gives back, as frozen records: runs, their sessions, comparisons.

results/ fills them (any backend); report/, terminal/ and stats/analysis.py read them with
checked attribute names. Health, interference, the devices and the rounds are records of their
own (records/health.py, interference.py, devices.py, rounds.py); free-form objects kept as JSON
(host facts, settings: the doctor snapshot's sections) stay `Json`, with a typed view
(`HostBrief`) for the fields the code reads. results/encode.py turns these records into the JSON
the commands print: the same keys, order and values as when the store returned rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from pgdyno.records.devices import DeviceLayout, RunDevice
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.pgbench import StatementLatency
from pgdyno.records.profile import CpuProfile
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.run import Event, RunRecord, SecondRow
from pgdyno.records.tpcc import TpccResult
from pgdyno.records.waits import WaitProfile

type Json = bool | int | float | str | list[Json] | dict[str, Json] | None
type JsonObject = dict[str, Json]


def second_values(row: SecondRow) -> list[tuple[str, float]]:
    """A second's measured values by column name, in column order; `t` and gaps left out."""
    return [
        (f.name, value)
        for f in fields(row)
        if f.name != "t" and (value := getattr(row, f.name)) is not None
    ]


def _number(blob: Mapping[str, Json] | None, key: str) -> float | None:
    """A number from a JSON object as stored (an int stays an int), else None."""
    value = (blob or {}).get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class HostBrief:
    """What a report shows of the host a run's session ran on."""

    kernel: Json
    cpu_model: Json
    cpu_count: Json
    memory_bytes: float | None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a comparison's analysis needs of one run."""

    id: int
    set_name: str | None
    status: str
    workload: str
    scale: int
    clients: int
    repeat: int
    tps: float | None
    latency_p99_ms: float | None
    latency_avg_ms: float | None
    health: RunHealth  # RunHealth() when the run has none
    pg_version: str
    interference: Interference | None = None  # None: a clean run (or one stored before schema 5)
    tpcc: TpccResult | None = None  # the TPC-C-like workload's figures
    latency_max_ms: float | None = None  # the run's worst transaction
    waits: WaitProfile | None = None  # the wait-event profile; None: not sampled
    profile: CpuProfile | None = None  # the on-CPU profile; None: not taken

    @classmethod
    def of(cls, run_id: int, record: RunRecord) -> RunOutcome:
        """What the analysis needs of a run just stored as `run_id`, taken from the record in
        memory: the same figures the store gives back (tests/unit/test_round_trip.py proves
        the verdicts agree), so a round is judged without reading the store again."""
        summary, latency = record.summary, record.latency
        return cls(
            id=run_id, set_name=record.set_name, status=record.status,
            workload=record.cell.workload, scale=record.cell.scale, clients=record.cell.clients,
            repeat=record.cell.repeat, tps=summary.tps if summary else None,
            latency_p99_ms=latency.p99_ms if latency else None,
            latency_avg_ms=summary.latency_avg_ms if summary else None,
            health=record.health, pg_version=record.pg_version,
            interference=record.interference, tpcc=record.tpcc,
            latency_max_ms=latency.max_ms if latency else None, waits=record.waits,
            profile=record.profile,
        )  # fmt: skip

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.health.warnings

    @property
    def throughput(self) -> float | None:
        """The figure the run is judged by: NOPM for the TPC-C-like workload, else TPS."""
        return self.tpcc.nopm if self.tpcc is not None else self.tps

    @property
    def interfered(self) -> bool:
        """Other processes or the hypervisor took more of the machine than a run tolerates."""
        return self.interference is not None


@dataclass(frozen=True, slots=True)
class _RunColumns:
    """The leading columns of the runs table, in table order, shared by the two views below
    (their JSON, results/encode.py, keeps this order)."""

    id: int
    session_id: int
    status: str
    started_at: str
    finished_at: str
    workload: str
    scale: int
    clients: int
    jobs: int
    duration_s: int
    protocol: str
    rate: float | None
    repeat: int
    warmup_s: int
    tps: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    transactions: int | None
    failed_transactions: int | None
    dataset_bytes: int | None
    pg_version: str
    pgbench_version: str


@dataclass(frozen=True, slots=True)
class RunListing(_RunColumns):
    """One line of `runs list`: the summary columns and the status of the run's session."""

    error: str | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    latency_max_ms: float | None
    latency_source: str | None
    interference: Interference | None  # None: a clean run
    tpcc: TpccResult | None  # the TPC-C-like workload's figures
    session_status: str
    host: str  # the hostname of the machine the run measured ("" when not recorded)
    comparison_id: int | None = None  # the comparison the run belongs to (None: a bench)
    set_name: str | None = None  # its configuration set in that comparison


@dataclass(frozen=True, slots=True)
class StoredRun(_RunColumns):
    """One run in full: its row, its session's host and target, and its per-second data."""

    pgbench_argv: tuple[str, ...]
    settings: Mapping[str, str]
    summary: JsonObject | None  # pgbench's summary as parsed (records.Summary's fields)
    error: str | None
    stderr: str | None
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_p99_ms: float | None
    latency_p999_ms: float | None
    latency_max_ms: float | None
    latency_source: str | None
    health: RunHealth | None  # None for runs stored before health was kept
    devices: DeviceLayout | None  # None for runs stored before devices were kept
    comparison_id: int | None
    set_name: str | None
    interference: Interference | None  # None: a clean run
    tpcc: TpccResult | None  # the TPC-C-like workload's figures
    waits: WaitProfile | None  # the wait-event profile; None: not sampled (or before schema 9)
    profile: CpuProfile | None  # the on-CPU profile; None: not taken (or before schema 10)
    host: JsonObject  # of the run's session
    server: JsonObject
    target: str
    session_status: str
    seconds: tuple[SecondRow, ...]
    statements: tuple[StatementLatency, ...]
    samples: Mapping[str, Mapping[int, float]]  # metric -> {epoch second -> value}
    events: tuple[Event, ...]

    @property
    def interfered(self) -> bool:
        return self.interference is not None

    @property
    def host_brief(self) -> HostBrief:
        host = self.host
        return HostBrief(
            host.get("kernel"), host.get("cpu_model"), host.get("cpu_count"),
            _number(host, "memory_bytes"),
        )  # fmt: skip

    def device_list(self) -> tuple[RunDevice, ...]:
        """Every device the run recorded, data first; () for a run stored without them."""
        return () if self.devices is None else self.devices.found

    def device(self, role: str) -> RunDevice | None:
        return None if self.devices is None else self.devices.device(role)

    def outcome(self, set_name: str | None = None) -> RunOutcome:
        """This run as a comparison's analysis takes it, grouped under `set_name`."""
        return RunOutcome(
            self.id, self.set_name if set_name is None else set_name, self.status,
            self.workload, self.scale, self.clients, self.repeat, self.tps,
            self.latency_p99_ms, self.latency_avg_ms, self.health or RunHealth(), self.pg_version,
            self.interference, self.tpcc, self.latency_max_ms, self.waits, self.profile,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ComparisonSet:
    """A configuration set of a comparison: as the plan asked, and as read back in effect."""

    name: str
    requested: JsonObject
    effective: JsonObject | None  # None until the set was applied


@dataclass(frozen=True, slots=True)
class ComparisonPlan:
    """What a comparison measures, as its plan says: the plan (name, path, digest of the text,
    text), mode, baseline and scales. A new comparison and a stored one both hold it."""

    name: str
    plan_path: str
    plan_digest: str
    plan_text: str
    mode: str  # sets / ladder
    baseline: str
    scales: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NewComparison(ComparisonPlan):
    """A comparison as it starts, for the store to record, with the sets' settings as the plan
    asks for them."""

    sets: tuple[tuple[str, Mapping[str, object]], ...]  # (name, requested settings), plan order


@dataclass(frozen=True, slots=True)
class StoredComparison(ComparisonPlan):
    """One `pgdyno compare` of a plan, with its sets in plan order (its JSON starts with `id`,
    as every stored record's does: results/encode.py)."""

    id: int
    status: str
    started_at: str
    finished_at: str | None
    hostname: str | None
    pid: int | None
    owner_started: int | None
    found_interrupted_at: str | None
    sets: tuple[ComparisonSet, ...]
    # The rounds: fixed/adaptive, orders, durations, why they stopped (experiment/rounds.py's
    # RoundLog); None for comparisons stored before they were kept.
    rounds: RoundHistory | None = None


@dataclass(frozen=True, slots=True)
class ReportSource:
    """The newest comparison or bench session (`report --last`)."""

    kind: str  # comparison / session
    id: int
