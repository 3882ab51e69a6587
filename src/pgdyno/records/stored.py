"""What the results store gives back, as frozen records: runs, their sessions, comparisons.

store/ fills them (any backend); report/, render/ and stats/analysis.py read them with
checked attribute names. Free-form blobs kept as JSON (host facts, settings, health, devices)
stay `Json` for a faithful `as_json()`, and get typed views (`RunHealth`, `Device`, `HostBrief`)
for the fields the code reads. `as_json()` gives exactly the dicts the commands printed when
the store returned rows: same keys, same order (the table's column order), same values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass

from pgdyno.records.pgbench import StatementLatency
from pgdyno.records.run import Event, SecondRow

type Json = bool | int | float | str | list[Json] | dict[str, Json] | None
type JsonObject = dict[str, Json]


def _json(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value


def record_json(record: object) -> dict[str, object]:
    """A record's fields in declaration order, nested records and tuples as JSON-ready values."""
    return {f.name: _json(getattr(record, f.name)) for f in fields(record)}  # type: ignore[arg-type]


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
class RunHealth:
    """The stability figures of a run (stats/steady.py's Health, as stored)."""

    measured_s: float | None
    trimmed_s: float | None
    tps_cv_pct: float | None
    tps_trend_pct: float | None
    client_cpu_pct: float | None
    client_capacity_pct: float | None
    warnings: tuple[str, ...]

    @classmethod
    def of(cls, blob: Mapping[str, Json] | None) -> RunHealth:
        """
        >>> RunHealth.of({"tps_cv_pct": 3, "warnings": ["noisy"]}).tps_cv_pct
        3
        >>> RunHealth.of(None).warnings
        ()
        """
        warnings = (blob or {}).get("warnings")
        return cls(
            measured_s=_number(blob, "measured_s"),
            trimmed_s=_number(blob, "trimmed_s"),
            tps_cv_pct=_number(blob, "tps_cv_pct"),
            tps_trend_pct=_number(blob, "tps_trend_pct"),
            client_cpu_pct=_number(blob, "client_cpu_pct"),
            client_capacity_pct=_number(blob, "client_capacity_pct"),
            warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        )


def interference_text(
    foreign_cpu_pct: float, steal_pct: float, top: Sequence[tuple[str, float]]
) -> str:
    """What a run's interference was, in one line (the command names as recorded).

    >>> interference_text(48.2, 0.0, [("yes", 47.5), ("make", 0.7)])
    'other processes took 48.2% of the CPUs (yes 47.5%, make 0.7%)'
    >>> interference_text(0.4, 9.9, [])
    'other processes took 0.4% of the CPUs; the hypervisor stole 9.9% of the CPU time'
    """
    text = f"other processes took {foreign_cpu_pct:.1f}% of the CPUs"
    if top:
        text += " (" + ", ".join(f"{command} {pct:.1f}%" for command, pct in top) + ")"
    if steal_pct > 0:
        text += f"; the hypervisor stole {steal_pct:.1f}% of the CPU time"
    return text


@dataclass(frozen=True, slots=True)
class RunInterference:
    """A flagged run's interference (collect/interference.py's record, as stored): foreign CPU
    and steal in % of the machine, the biggest foreign commands."""

    foreign_cpu_pct: float
    steal_pct: float
    top: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, blob: Mapping[str, Json] | None) -> RunInterference | None:
        """
        >>> RunInterference.of({"foreign_cpu_pct": 48.2, "steal_pct": 0, "top": [["yes", 47.5]]})
        RunInterference(foreign_cpu_pct=48.2, steal_pct=0, top=(('yes', 47.5),))
        >>> RunInterference.of(None) is None
        True
        """
        if blob is None:
            return None
        top = blob.get("top")
        return cls(
            foreign_cpu_pct=_number(blob, "foreign_cpu_pct") or 0.0,
            steal_pct=_number(blob, "steal_pct") or 0,
            top=tuple(
                (str(entry[0]), float(entry[1]))
                for entry in (top if isinstance(top, list) else [])
                if isinstance(entry, list) and len(entry) == 2
                and isinstance(entry[1], int | float) and not isinstance(entry[1], bool)
            ),
        )  # fmt: skip

    def text(self) -> str:
        return interference_text(self.foreign_cpu_pct, self.steal_pct, self.top)


@dataclass(frozen=True, slots=True)
class Device:
    """One block device a run's data or WAL lived on (host/devices.py's facts, as stored)."""

    role: str  # data / wal
    name: Json
    fstype: Json
    mount_point: Json
    mount_options: Json
    path: Json
    scheduler: Json
    read_ahead_kb: Json
    rotational: Json


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
    health: JsonObject  # {} when the run has none
    pg_version: str
    interference: JsonObject | None = None  # None: a clean run (or one stored before schema 5)

    @property
    def warnings(self) -> tuple[str, ...]:
        return RunHealth.of(self.health).warnings

    @property
    def interfered(self) -> bool:
        """Other processes or the hypervisor took more of the machine than a run tolerates."""
        return self.interference is not None

    def as_json(self) -> dict[str, object]:
        return record_json(self)


@dataclass(frozen=True, slots=True)
class _RunColumns:
    """The leading columns of the runs table, in table order, shared by the two views below
    (their `as_json()` keeps this order)."""

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
    interference: JsonObject | None  # None: a clean run
    session_status: str

    def as_json(self) -> dict[str, object]:
        return record_json(self)


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
    health: JsonObject | None  # None for runs stored before health was kept
    devices: JsonObject | None
    comparison_id: int | None
    set_name: str | None
    interference: JsonObject | None  # None: a clean run
    host: JsonObject  # of the run's session
    server: JsonObject
    target: str
    session_status: str
    seconds: tuple[SecondRow, ...]
    statements: tuple[StatementLatency, ...]
    samples: Mapping[str, Mapping[int, float]]  # metric -> {epoch second -> value}
    events: tuple[Event, ...]

    def as_json(self) -> dict[str, object]:
        return record_json(self)

    @property
    def run_health(self) -> RunHealth:
        return RunHealth.of(self.health)

    @property
    def run_interference(self) -> RunInterference | None:
        return RunInterference.of(self.interference)

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

    def device_list(self) -> list[Device]:
        """Every device the run recorded, in stored order (data, then WAL)."""
        found = []
        for role, dev in (self.devices or {}).items():
            if isinstance(dev, dict):
                found.append(
                    Device(
                        role, dev.get("name"), dev.get("fstype"), dev.get("mount_point"),
                        dev.get("mount_options"), dev.get("path"), dev.get("scheduler"),
                        dev.get("read_ahead_kb"), dev.get("rotational"),
                    )
                )  # fmt: skip
        return found

    def device(self, role: str) -> Device | None:
        return next((d for d in self.device_list() if d.role == role), None)

    def outcome(self, set_name: str | None = None) -> RunOutcome:
        """This run as a comparison's analysis takes it, grouped under `set_name`."""
        return RunOutcome(
            self.id, self.set_name if set_name is None else set_name, self.status,
            self.workload, self.scale, self.clients, self.repeat, self.tps,
            self.latency_p99_ms, self.latency_avg_ms, self.health or {}, self.pg_version,
            self.interference,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ComparisonSet:
    """A configuration set of a comparison: as the plan asked, and as read back in effect."""

    name: str
    requested: JsonObject
    effective: JsonObject | None  # None until the set was applied

    def as_json(self) -> dict[str, object]:
        return record_json(self)


@dataclass(frozen=True, slots=True)
class StoredComparison:
    """One `pgdyno compare` of a plan, with its sets in plan order."""

    id: int
    name: str
    plan_path: str
    plan_digest: str
    plan_text: str
    mode: str  # sets / ladder
    baseline: str
    scales: tuple[int, ...]
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
    rounds: JsonObject | None = None

    def as_json(self) -> dict[str, object]:
        return record_json(self)


@dataclass(frozen=True, slots=True)
class ReportSource:
    """The newest comparison or bench session (`report --last`)."""

    kind: str  # comparison / session
    id: int
