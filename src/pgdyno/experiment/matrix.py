"""The bench matrix: what to run (from options or a plan file), validated, expanded into ordered
cells, and how long it should take (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pgdyno.collect.interference import FOREIGN_CPU_MAX_PCT
from pgdyno.collect.waits import DEFAULT_HZ, MAX_HZ
from pgdyno.errors import PgdynoError, UsageError
from pgdyno.experiment.rounds import (
    DEFAULT_BUDGET_S,
    DEFAULT_PRECISION_PCT,
    Adaptive,
    parse_budget,
)
from pgdyno.pgbench.command import (
    WORKLOADS,
    Workload,
    builtin_workload,
    jobs_for,
    one_dataset,
    script_workload,
    with_tpcc_options,
)
from pgdyno.pgbench.scale import parse_scale_spec
from pgdyno.plan.load import Plan
from pgdyno.records import RunCell
from pgdyno.records.tpcc import TpccOptions

# Seconds a run costs beyond warm-up and -T (dataset copy, connections, the probe): the one
# figure behind every run-time estimate, the progress bar's and `plan check`'s alike.
RUN_OVERHEAD_S = 3.0


class BenchSpec(BaseModel):
    """Everything `pgdyno bench` was asked to do."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    workloads: Annotated[list[Workload], Field(min_length=1)]
    scales: Annotated[list[str | int], Field(min_length=1)]
    clients: Annotated[list[Annotated[int, Field(ge=1, le=10000)]], Field(min_length=1)]
    jobs: str = "auto"
    duration_s: Annotated[int, Field(ge=1, le=7 * 86400)] = 60
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    rate: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    latency_limit_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    repeats: Annotated[int, Field(ge=1, le=1000)] = 1
    warmup_s: Annotated[int, Field(ge=0, le=86400)] = 0
    trim_s: Annotated[int, Field(ge=0, le=86400)] | None = None  # None: default_trim()
    # auto (sample to ~2000 logged transactions a second), full, or a rate in (0, 1]
    latency_log: str = "auto"
    # Read the dataset into shared buffers with pg_prewarm before each run's warm-up.
    prewarm: bool = False
    per_statement: bool = False  # pgbench -r
    progress: bool = False  # pgbench -P 1, kept as the series pgbench.progress_tps
    # Looks a second at pg_stat_activity for the wait-event profile (collect/waits.py); 0: off
    wait_sample_hz: Annotated[int, Field(ge=0, le=MAX_HZ)] = DEFAULT_HZ
    # Sample the server's processes with perf for the on-CPU profile (collect/cpu_profile.py);
    # None: as the environment says (`wanted`: on unless PGDYNO_CPU_PROFILE=off)
    cpu_profile: bool | None = None
    # A run is flagged (and left out of verdicts) when other processes took more than this % of
    # the machine's CPU during it (collect/interference.py).
    foreign_cpu_limit_pct: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = (
        FOREIGN_CPU_MAX_PCT
    )
    # Adaptive rounds (either one set): repeat until every interval is this narrow (half-width,
    # in %) or the budget (seconds of machine time) is spent. `repeats` is then not used.
    precision_pct: Annotated[float, Field(gt=0, le=50, allow_inf_nan=False)] | None = None
    budget_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None

    @property
    def adaptive(self) -> Adaptive | None:
        """The adaptive request, defaults filled in; None for a fixed number of repeats."""
        if self.precision_pct is None and self.budget_s is None:
            return None
        return Adaptive(
            self.precision_pct if self.precision_pct is not None else DEFAULT_PRECISION_PCT,
            self.budget_s if self.budget_s is not None else DEFAULT_BUDGET_S,
        )

    @property
    def dataset(self) -> str:
        """The dataset every workload runs on: pgbench's, or the TPC-C-like one (whose scale is
        warehouses); one matrix does not mix them (`_check_combinations`)."""
        return "tpcc" if any(w.tpcc is not None for w in self.workloads) else "pgbench"

    @field_validator("latency_log")
    @classmethod
    def _latency_log(cls, value: str) -> str:
        if value in ("auto", "full") or _sampling_rate(value) is not None:
            return value
        raise ValueError("choose auto, full or a sampling rate in (0, 1] such as 0.1")


def _sampling_rate(text: str) -> float | None:
    """A pgbench --sampling-rate: a finite number in (0, 1], else None.

    >>> _sampling_rate("0.1"), _sampling_rate("1"), _sampling_rate("0"), _sampling_rate("nan")
    (0.1, 1.0, None, None)
    """
    try:
        rate = float(text)
    except ValueError:
        return None
    return rate if math.isfinite(rate) and 0 < rate <= 1 else None


_OPTION = {
    "workloads": "-w/--workload",
    "scales": "-s/--scale",
    "duration_s": "-T/--time",
    "repeats": "--repeats",
    "warmup_s": "--warmup",
    "rate": "-R/--rate",
    "latency_limit_ms": "-L/--latency-limit",
    "clients": "-c/--clients",
    "protocol": "-M/--protocol",
    "trim_s": "--trim",
    "latency_log": "--latency-log",
    "precision_pct": "--precision",
    "budget_s": "--budget",
    "wait_sample_hz": "--wait-sample-hz",
    "foreign_cpu_limit_pct": "--foreign-cpu-limit",
}


_BOUND = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("more than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}


def _reason(error: Any) -> str:
    """What a pydantic error means for the option, in words."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "value_error":
        return str(ctx.get("error"))
    if kind in _BOUND:
        words, key = _BOUND[kind]
        return f"it must be {words} {ctx.get(key)}"
    if kind == "finite_number":
        return "it must be a finite number"
    if kind == "too_short":
        return "give at least one value"
    return str(error["msg"]).lower()


def make_spec(**fields: object) -> BenchSpec:
    """Validate bench options; the first problem becomes one sentence naming the option.

    >>> from pgdyno.pgbench.command import builtin_workload
    >>> make_spec(workloads=[builtin_workload("select-only")], scales=[1], clients=[1],
    ...           duration_s=0)
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: -T/--time 0 is not valid: it must be at least 1.
    """
    try:
        spec = BenchSpec(**fields)  # type: ignore[arg-type]
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "options"
        raise UsageError(
            f"{_OPTION.get(field, field)} {error.get('input')!r} is not valid: {_reason(error)}."
        ) from None
    _check_combinations(spec)
    return spec


def _check_combinations(spec: BenchSpec) -> None:
    """Options that are valid alone but not together."""
    jobs_for(1, spec.jobs, 1)  # the policy itself: auto, clients or a number >= 1
    one_dataset(spec.workloads)
    most = max(spec.clients)
    if spec.jobs.isdigit() and int(spec.jobs) > most:
        raise UsageError(
            f"-j/--jobs {spec.jobs} is more than the largest client count ({most}): pgbench "
            "needs jobs <= clients, so give at most that many, or auto."
        )
    if spec.trim_s is not None and spec.trim_s >= spec.duration_s:
        raise UsageError(
            f"--trim {spec.trim_s} leaves nothing of a {spec.duration_s} s run (-T): give a "
            "trim shorter than the run."
        )


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


def seconds_per_run(spec: BenchSpec) -> float:
    """What one run of `spec` is expected to take: warm-up, -T and RUN_OVERHEAD_S (3 s).

    >>> from pgdyno.pgbench.command import builtin_workload
    >>> seconds_per_run(make_spec(workloads=[builtin_workload("select-only")], scales=[1],
    ...                           clients=[1], duration_s=60, warmup_s=10))
    73.0
    """
    return spec.warmup_s + spec.duration_s + RUN_OVERHEAD_S


def run_count(spec: BenchSpec, sets: int = 1) -> int:
    """Runs of the whole matrix, for each of `sets` configuration sets."""
    return len(spec.workloads) * len(spec.scales) * len(spec.clients) * spec.repeats * sets


def parse_workloads(workload: str | None, scripts: Sequence[str]) -> list[Workload]:
    """The workloads of -w/--workload (a comma list of built-ins) and -f/--script files.

    >>> [w.name for w in parse_workloads("select-only, tpcb-like", [])]
    ['select-only', 'tpcb-like']
    >>> [w.name for w in parse_workloads(None, [])]
    ['tpcb-like']
    """
    names = [w.strip() for w in (workload or "").split(",") if w.strip()]
    if workload is not None and not names:
        raise UsageError(
            f"-w/--workload {workload!r} names no workload: choose from {', '.join(WORKLOADS)} "
            "(comma list), or leave the option out for tpcb-like."
        )
    if not names and not scripts:
        names = ["tpcb-like"]
    found = [builtin_workload(name) for name in names] if not scripts else []
    if scripts:
        # Built-ins named alongside script files join the same weighted mix, as in pgbench.
        found.append(script_workload(list(scripts), names))
    return found


def parse_scales(scale: str) -> list[str | int]:
    """The scales of -s/--scale: presets or pgbench scales, comma separated.

    >>> parse_scales("small,50")
    ['small', 50]
    """
    scales = [parse_scale_spec(s) for s in scale.split(",") if s.strip()]
    if not scales:
        raise UsageError(
            f"-s/--scale {scale!r} names no scale: give small, medium, large or a pgbench "
            "scale (comma list to sweep)."
        )
    return scales


def bench_spec(plan: Plan, cpus: int) -> BenchSpec:
    """The plan's matrix as bench options; a bad value is reported at its line."""
    m = plan.spec.matrix
    try:
        workloads = with_tpcc_options(
            [builtin_workload(w) for w in m.workloads],
            TpccOptions(all_warehouses=m.tpcc_all_warehouses, keying_thinking=m.tpcc_keying),
        )
    except PgdynoError as exc:
        raise UsageError(f"{plan.where(('matrix', 'workloads'))}: {exc}") from None
    try:
        scales = [parse_scale_spec(str(s)) for s in m.scales]
    except PgdynoError as exc:
        raise UsageError(f"{plan.where(('matrix', 'scales'))}: {exc}") from None
    try:
        jobs_for(1, m.jobs, cpus)
        return make_spec(
            workloads=workloads, scales=scales, clients=m.clients, jobs=m.jobs,
            duration_s=m.duration, protocol=m.protocol, rate=m.rate,
            latency_limit_ms=m.latency_limit, repeats=m.repeats, warmup_s=m.warmup,
            latency_log=m.latency_log, prewarm=m.prewarm, per_statement=m.per_statement,
            progress=m.progress, precision_pct=m.precision, wait_sample_hz=m.wait_sample_hz,
            cpu_profile=m.cpu_profile,
            **({} if m.foreign_cpu_limit is None
               else {"foreign_cpu_limit_pct": m.foreign_cpu_limit}),
            budget_s=parse_budget(m.budget, "budget") if m.budget is not None else None,
        )  # fmt: skip
    except PgdynoError as exc:
        raise UsageError(f"{plan.where(('matrix',))}: {exc}") from None


def with_adaptive(spec: BenchSpec, precision: float | None, budget: str | None) -> BenchSpec:
    """The spec with --precision/--budget from the command line (they override the plan's)."""
    update: dict[str, float] = {}
    if precision is not None:
        if precision > 50:
            raise UsageError(f"--precision {precision:g} is not valid: give at most 50 (%).")
        update["precision_pct"] = precision
    if budget is not None:
        update["budget_s"] = parse_budget(budget)
    return spec.model_copy(update=update) if update else spec
