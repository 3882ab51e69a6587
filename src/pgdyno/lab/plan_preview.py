"""`plan preview`: what a plan would run on this machine, checked, as one frozen record.

It reads the plan, checks every set against this host and the PostgreSQL versions it names
(`plan.check.check_plan`), and estimates the datasets and the time the runs take. It changes
nothing: it creates no directory, starts no server and installs no PostgreSQL version (a
missing one is checked against pgdyno's recorded settings and named in `missing`).

It lives beside the run loop (not in plan/, below it) because it estimates with the run
loop's own matrix (`bench_spec`, `run_count`, `seconds_per_run`) and storage sets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.experiment.capacity import CapacityPlan
from pgdyno.experiment.capacity_sets import capacity_plan
from pgdyno.experiment.compare import sandbox_host
from pgdyno.experiment.matrix import BenchSpec, bench_spec, run_count, seconds_per_run
from pgdyno.experiment.schedule import orders_note
from pgdyno.experiment.storage_sets import describe_storage, expected_dataset_bytes, storage_notes
from pgdyno.experiment.switching import Choice, plan_slow_settings
from pgdyno.experiment.twin_sets import choose
from pgdyno.host.machine import read_host
from pgdyno.pgbench.scale import DEFAULT_SHARED_BUFFERS, choose_scale
from pgdyno.plan.check import CheckedSet, check_plan, find_installed, is_installed
from pgdyno.plan.load import Plan, load_plan
from pgdyno.plan.model import MatrixSpec, PlanSpec
from pgdyno.plan.policy import Allowed
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.settings import convert_to_setting_unit, read_number
from pgdyno.postgres.settings_catalog import describe_settings


@dataclass(frozen=True)
class PreviewedSet:
    """One set as it would be applied: its PostgreSQL version and settings, as text."""

    name: str
    baseline: bool
    version: str
    pg: tuple[tuple[str, str], ...]  # (setting, postgresql.conf text)
    host: tuple[tuple[str, str], ...]  # (sysctl, block-device or THP knob, value)
    storage: str  # describe_storage's words ("-" when the set builds no filesystem)
    builds_storage: bool
    notes: tuple[str, ...]  # what building its storage would do to this machine


@dataclass(frozen=True)
class Duration:
    """How long the runs take: a fixed matrix, or adaptive rounds up to a budget."""

    mode: str  # the plan's [matrix] mode
    runs: int  # the whole matrix; with `adaptive`, one round of it
    minutes: float  # the whole matrix; with `adaptive`, one round
    adaptive: Adaptive | None = None


@dataclass(frozen=True)
class Adaptive:
    figure: str  # what the verdicts judge: TPS, or NOPM for the TPC-C-like dataset
    precision_pct: float
    budget_minutes: float


@dataclass(frozen=True)
class MissingVersion:
    """A PostgreSQL version the plan names that is not installed here, and how it would be."""

    version: str
    source: str


@dataclass(frozen=True)
class PlanPreview:
    name: str
    sets: tuple[PreviewedSet, ...]
    datasets: tuple[str, ...]  # one line per scale: the dataset and its estimated size
    duration: Duration
    missing: tuple[MissingVersion, ...]
    orders: str = ""  # which design orders the rounds, and why (experiment/schedule.py)
    seed: int | None = None  # the plan's [matrix] seed: the orders every run of it draws
    warmup_s: int = 0  # unmeasured load at each run's start, after its set is put in effect
    # One run per set and round, or switching inside one run, and why (experiment/switching.py)
    design: str = ""
    switching: bool = False  # the sets take turns inside one run: burn_in, not warmup, applies
    burn_in_s: float = 0  # [matrix] burn_in: seconds dropped after each switch inside the run
    capacity: str = ""  # [matrix] capacity_p99: every set swept on capacity after the rounds
    # Settings that act over minutes measured by shorter runs (experiment/switching.py)
    slow_settings: str = ""

    @property
    def has_storage(self) -> bool:
        return any(s.builds_storage for s in self.sets)


def preview_plan(env: Environment, plan_file: Path, allowed: Allowed) -> PlanPreview:
    """Load, check and estimate `plan_file` for this machine, changing nothing."""
    plan = load_plan(plan_file)
    host = read_host(env.proc_root, env.sys_root)
    spec = bench_spec(plan, host.cpu_count)
    checked = _checked(env, plan, allowed)
    memory = (host.memory_bytes, expected_dataset_bytes(spec, host))
    choice = choose(plan, checked, describe_settings, spec, memory)
    buffers = _shared_buffers(checked[0]) if checked else DEFAULT_SHARED_BUFFERS
    return PlanPreview(
        name=plan.name,
        sets=tuple(_previewed(c, plan.spec.baseline_name, env.data_dir) for c in checked),
        datasets=tuple(
            choose_scale(scale, host.memory_bytes, buffers, None, spec.dataset).describe()
            for scale in spec.scales  # before a server runs: its shared_buffers as the plan sets it
        ),
        duration=_duration(spec, len(checked), plan.spec.mode)
        if not choice.inside
        else _periods(spec, len(checked), plan.spec),
        missing=_missing(c.binaries for c in checked),
        orders=_orders(choice, len(checked), plan.spec.matrix),
        seed=plan.spec.matrix.seed,
        warmup_s=plan.spec.matrix.warmup,
        design=choice.note(),
        switching=choice.inside,
        burn_in_s=plan.spec.matrix.burn_in,
        capacity=_capacity(capacity_plan(plan, len(checked)), len(checked)),
        slow_settings=plan_slow_settings(plan) or "",
    )


def _capacity(plan: CapacityPlan | None, sets: int) -> str:
    """What `plan check` says of the capacity sweeps.

    >>> from pgdyno.stats.capacity import SweepPolicy
    >>> print(_capacity(CapacityPlan(SweepPolicy(5.0, 10, repeats=3), 600.0), 2))
    capacity: after the TPS rounds every set is swept at p99 <= 5 ms (10 s steps, their turns interleaved, 3 runs at each end: >= 75% confidence), 300 s of steps a set (capacity_budget 10 min in all); each set judged against the baseline
    """  # noqa: E501
    if plan is None:
        return ""
    policy = plan.policy
    return (
        f"capacity: after the TPS rounds every set is swept at p99 <= "
        f"{policy.target_p99_ms:g} ms ({policy.step_s:g} s steps, their turns interleaved, "
        f"{policy.repeats} runs at each end: >= {100 * policy.confidence:.4g}% confidence), "
        f"{plan.budget_s / max(1, sets):.0f} s of steps a set (capacity_budget "
        f"{plan.budget_s / 60:.4g} min in all); each set judged against the baseline"
    )


def _orders(choice: Choice, sets: int, matrix: MatrixSpec) -> str:
    """What `plan check` says of the orders: the balanced design of runs, or the periods."""
    if not choice.inside:
        return orders_note(sets)
    return (
        f"orders: one pgbench run; the sets take turns every {matrix.period} s, the first "
        f"{matrix.burn_in:g} s after each switch dropped (to the next whole second), the order "
        "within each round drawn at "
        "random from a seed that is printed and stored (`compare --seed N` replays it)."
    )


def _checked(env: Environment, plan: Plan, allowed: Allowed) -> list[CheckedSet]:
    """The sets checked for the sandbox; creates no directory, starts no sandbox, installs
    nothing."""
    existing = env.clusters_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the clusters will live on the disk of this directory
    return check_plan(
        plan, cache_dir=env.cache_dir, meta_for=describe_settings,
        host=sandbox_host(env, plan, allowed, existing), find=find_installed,
    )  # fmt: skip


def _previewed(c: CheckedSet, baseline_name: str, data_dir: Path) -> PreviewedSet:
    storage = c.spec.storage
    return PreviewedSet(
        name=c.name,
        baseline=c.name == baseline_name,
        version=c.binaries.version,
        pg=tuple(c.pg.items()),
        host=tuple((str(knob), value) for knob, value in c.host),
        storage=describe_storage(storage),
        builds_storage=bool(storage),
        notes=tuple(storage_notes(storage, data_dir)),
    )


def _duration(spec: BenchSpec, sets: int, mode: str) -> Duration:
    adaptive = spec.adaptive
    if adaptive is None:
        runs = run_count(spec, sets)
        return Duration(mode, runs, runs * seconds_per_run(spec) / 60)
    per_round = run_count(spec.model_copy(update={"repeats": 1}), sets)
    return Duration(
        mode, per_round, per_round * seconds_per_run(spec) / 60,
        Adaptive("NOPM" if spec.dataset == "tpcc" else "TPS", adaptive.precision_pct,
                 adaptive.budget_s / 60),
    )  # fmt: skip


def _periods(spec: BenchSpec, sets: int, plan: PlanSpec) -> Duration:
    """Switching inside one run: a round is a period of each set (`runs` counts periods)."""
    minutes = sets * plan.matrix.period / 60
    adaptive = spec.adaptive
    if adaptive is None:
        return Duration(plan.mode, sets * spec.repeats, minutes * spec.repeats)
    return Duration(
        plan.mode, sets, minutes, Adaptive("TPS", adaptive.precision_pct, adaptive.budget_s / 60)
    )


def _missing(found: Iterable[Binaries]) -> tuple[MissingVersion, ...]:
    """The versions not installed here, each once, in the order the sets name them."""
    binaries = {b.version: b for b in found}
    return tuple(
        MissingVersion(b.version, b.source.partition(": ")[2])
        for b in binaries.values()
        if not is_installed(b)
    )


def _shared_buffers(baseline: CheckedSet) -> int:
    """The baseline's shared_buffers in bytes as its settings write it (8kB pages when bare),
    or PostgreSQL's default, for the size of a `small` dataset."""
    text = baseline.pg.get("shared_buffers")
    found = read_number(text, integer=True) if text is not None else None
    if found is None:
        return DEFAULT_SHARED_BUFFERS
    number, unit = found
    in_kb = convert_to_setting_unit(number, unit or "8kB", "kB")
    return DEFAULT_SHARED_BUFFERS if in_kb is None else int(in_kb) * 1024
