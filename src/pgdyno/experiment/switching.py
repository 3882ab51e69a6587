"""Switching inside one run: which plans may, which design a comparison runs, and the periods
(pure: the knowledge is data/switching.toml, nothing here touches a server or a file but it).

A plan whose sets differ only by settings a reload makes current at once can be measured by
one pgbench run during which the sets take turns, every `period` seconds, instead of one run
per set and round: pgbench's start-up, the dataset copy and the state each run starts from
(caches, the checkpoint cycle) are then the same for every set, and a pair of periods is a
round of the paired analysis (a switchback design: Bojinov, Simchi-Levi & Zhao 2023, "Design
and analysis of switchback experiments", Management Science). It assumes what the design
assumes: the change acts at once and leaves nothing beyond the `burn_in` dropped after each
switch. Settings known to act over minutes are listed in data/switching.toml with their
reason, and disqualify the plan (`qualify`); `choose_design` turns the plan's `design` option
into the design that runs and the sentence `plan check` and `compare` say about it. The engine
is pgdyno.experiment.switched_run.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from pgdyno.errors import UsageError
from pgdyno.experiment.matrix import BenchSpec, run_count
from pgdyno.plan.check import CheckedSet, MetaLoader
from pgdyno.plan.load import Plan
from pgdyno.plan.model import applied_sets
from pgdyno.postgres.settings import SettingMeta

SWITCHING_DATA = Path(str(resources.files("pgdyno") / "data" / "switching.toml"))
# pg_settings contexts whose settings a reload (SIGHUP) makes current in every session.
RELOAD_CONTEXTS = ("sighup", "user", "superuser")


@dataclass(frozen=True)
class Rule:
    """A setting (or `prefix*`, `*suffix`) that does not switch, why, and where that is said."""

    name: str
    reason: str
    evidence: str

    def matches(self, setting: str) -> bool:
        """
        >>> Rule("autovacuum*", "", "").matches("autovacuum_naptime")
        True
        >>> Rule("*_cost", "", "").matches("random_page_cost"), Rule("*_cost", "", "").matches("x")
        (True, False)
        """
        return fnmatchcase(setting.lower(), self.name.lower())


@dataclass(frozen=True)
class Knowledge:
    """data/switching.toml: settings with a long carry-over, planner settings prepared
    statements do not see at once, and the sysctls read on every use."""

    carry_over: tuple[Rule, ...]
    prepared: tuple[Rule, ...]
    sysctls: frozenset[str]


def parse_knowledge(text: str) -> Knowledge:
    """The knowledge file's text as a record.

    >>> k = parse_knowledge('[[carry_over]]\\nname = "max_wal_size"\\nreason = "r"\\n'
    ...                     'evidence = "https://x"\\n[sysctl]\\nread_on_every_use = []\\n')
    >>> k.carry_over[0].name, k.prepared, k.sysctls
    ('max_wal_size', (), frozenset())
    """
    data = tomllib.loads(text)

    def rules(key: str) -> tuple[Rule, ...]:
        return tuple(Rule(r["name"], r["reason"], r["evidence"]) for r in data.get(key, []))

    sysctls = data.get("sysctl", {}).get("read_on_every_use", [])
    return Knowledge(rules("carry_over"), rules("prepared"), frozenset(sysctls))


@cache
def knowledge() -> Knowledge:
    return parse_knowledge(SWITCHING_DATA.read_text(encoding="utf-8"))


# Runs shorter than this cannot show what the [[carry_over]] settings do: the default
# checkpoint_timeout, the longest of the cycles they act on (checkpoints; autovacuum's 1 min
# naptime is shorter).
SLOW_HORIZON_S = 300


def slow_settings_note(
    sets: Sequence[Mapping[str, str]], duration_s: int, known: Knowledge | None = None
) -> str | None:
    """What runs of `duration_s` cannot show: the PostgreSQL settings that differ between the
    `sets` and act over minutes, in one sentence (`plan check`, `compare`); None when there are
    none or the runs are long enough. One run per set and round still measures them, for those
    seconds.

    >>> k = parse_knowledge('[[carry_over]]\\nname = "max_wal_size"\\nreason = "minutes of WAL"\\n'
    ...                     'evidence = "https://x"\\n')
    >>> sets = [{}, {"max_wal_size": "4GB", "work_mem": "8MB"}]
    >>> print(slow_settings_note(sets, 20, k))  # doctest: +NORMALIZE_WHITESPACE
    runs of 20 s and settings that act over minutes: max_wal_size (minutes of WAL). A run this
    short meets a checkpoint or a vacuum pass by chance, so a verdict on these settings is on
    those 20 s, and "no detectable difference" does not say they do nothing; runs of at least
    300 s (duration) would show what they do.
    >>> slow_settings_note(sets, 300, k) is None, slow_settings_note(sets[:1], 20, k) is None
    (True, True)
    """
    if duration_s >= SLOW_HORIZON_S:
        return None
    known = known or knowledge()
    slow = [
        (name, rule.reason)
        for name in differing(sets)
        if (rule := next((r for r in known.carry_over if r.matches(name)), None)) is not None
    ]
    if not slow:
        return None
    (first, why), *rest = slow
    names = ", ".join([f"{first} ({why})", *(name for name, _ in rest)])
    return (
        f"runs of {duration_s} s and settings that act over minutes: {names}. A run this short "
        "meets a checkpoint or a vacuum pass by chance, so a verdict on these settings is on "
        f'those {duration_s} s, and "no detectable difference" does not say they do nothing; '
        f"runs of at least {SLOW_HORIZON_S} s (duration) would show what they do."
    )


def plan_slow_settings(plan: Plan) -> str | None:
    """`slow_settings_note` for the plan's sets as they run (ladders cumulative)."""
    sets = [{name: str(value) for name, value in s.pg.items()} for s in applied_sets(plan.spec)]
    return slow_settings_note(sets, plan.spec.matrix.duration)


@dataclass(frozen=True)
class Qualification:
    """Whether the plan may switch inside one run, and the sentence that says why (not)."""

    inside: bool
    reason: str


@dataclass(frozen=True)
class PlanShape:
    """What besides the settings decides whether a plan can switch: its dataset (pgbench's or
    the TPC-C-like one), the number of cells of its matrix, its query protocol."""

    dataset: str
    cells: int
    protocol: str


def differing(sets: Sequence[Mapping[str, str]]) -> list[str]:
    """The PostgreSQL settings whose value is not the same in every set (a setting a set does
    not name has the server's value there), in name order.

    >>> differing([{"work_mem": "4MB", "jit": "off"}, {"work_mem": "8MB", "jit": "off"}, {}])
    ['jit', 'work_mem']
    >>> differing([{"work_mem": "4MB"}, {"work_mem": "4MB"}])
    []
    """
    names = sorted({name for s in sets for name in s})
    return [n for n in names if len({s.get(n) for s in sets}) > 1]


def _setting_reason(
    name: str, meta: Mapping[str, SettingMeta], protocol: str, known: Knowledge
) -> str | None:
    """Why changing `name` between periods would not measure it; None when it may switch."""
    found = meta.get(name)
    if found is None:
        return f"{name} is not a setting this server describes"
    if found.context not in RELOAD_CONTEXTS:
        return f"{name} needs a restart (pg_settings context {found.context})"
    for rule in known.carry_over:
        if rule.matches(name):
            return f"{name} acts over minutes: {rule.reason} ({rule.evidence})"
    if protocol == "prepared":
        for rule in known.prepared:
            if rule.matches(name):
                return f"{name} does not reach prepared statements at once: {rule.reason}"
    return None


def _set_reason(checked: Sequence[CheckedSet], known: Knowledge) -> str | None:
    """Why the sets cannot share one server through one run: versions, storage, host settings."""
    if len({c.binaries.version for c in checked}) > 1:
        return "the sets run different PostgreSQL versions, each on its own server"
    for c in checked:
        if c.spec.storage is not None:
            return f"set {c.name} puts the data on a filesystem of its own ([set.storage])"
    hosts = [{str(knob): value for knob, value in c.host} for c in checked]
    for name in differing(hosts):  # "sysctl vm.x", "block sda read_ahead_kb", "thp enabled"
        if name.removeprefix("sysctl ") not in known.sysctls:
            return (
                f"{name} is a host setting not known to take effect at its next read and "
                "leave nothing behind (data/switching.toml lists none)"
            )
    return None


def qualify(
    checked: Sequence[CheckedSet],
    meta: Mapping[str, SettingMeta],
    shape: PlanShape,
    known: Knowledge | None = None,
) -> Qualification:
    """Whether every set differs from the others only by settings a reload makes current at
    once, on one server, for a matrix one pgbench run can measure; the reason either way
    (the first thing that disqualifies the plan)."""
    known = known or knowledge()
    if shape.dataset != "pgbench":
        return Qualification(False, "the TPC-C-like workload checks its data after every run")
    if shape.cells != 1:
        return Qualification(
            False,
            f"the matrix has {shape.cells} cells and one pgbench run measures one (one "
            "workload, scale and client count)",
        )
    why = _set_reason(checked, known)
    if why is not None:
        return Qualification(False, why)
    for name in differing([c.pg for c in checked]):
        why = _setting_reason(name, meta, shape.protocol, known)
        if why is not None:
            return Qualification(False, why)
    return Qualification(True, "every set changes only reload settings that act at once")


@dataclass(frozen=True)
class Choice:
    """The design a comparison runs ("inside": switching inside one run; "runs": one run per
    set and round) and the sentence that says why."""

    design: str
    reason: str

    @property
    def inside(self) -> bool:
        return self.design == "inside"

    def note(self) -> str:
        """
        >>> Choice("runs", "the plan asks for it").note()
        'design: one run per set and round: the plan asks for it'
        """
        what = {
            "inside": "switching inside runs",
            "twins": "twin servers (one per set, each started once; one run per set and round)",
        }.get(self.design, "one run per set and round")
        return f"design: {what}: {self.reason}"


def choose_design(requested: str, found: Qualification, *, where: str = "design") -> Choice:
    """The design that runs for the plan's `design` option: "auto" switches when the plan
    qualifies, "inside" insists (a plan that does not qualify is refused: one sentence),
    "runs" never switches.

    >>> yes, no = Qualification(True, "every set ..."), Qualification(False, "x needs a restart")
    >>> choose_design("auto", yes).design, choose_design("auto", no).reason
    ('inside', 'x needs a restart')
    >>> choose_design("inside", no)
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: design: "inside" cannot switch this plan inside one run: x needs a restart; use design = "auto" or "runs".
    """  # noqa: E501
    if requested == "runs":
        return Choice("runs", 'the plan asks for it: design = "runs"')
    if not found.inside and requested == "inside":
        raise UsageError(
            f'{where}: "inside" cannot switch this plan inside one run: {found.reason}; use '
            'design = "auto" or "runs".'
        )
    return Choice("inside" if found.inside else "runs", found.reason)


@dataclass(frozen=True)
class PairOrders:
    """The order of the sets in each round (a pair of periods for two sets), each round's drawn
    at random from `seed` alone (a fair coin for two sets, a random permutation for more):
    the switchback's randomisation, replayed by the same seed. Not balanced for the set before
    (a period's burn-in is there for that), but never the same order every round.

    >>> d = PairOrders(seed=4)
    >>> [d.order("ab", r) for r in range(1, 5)] == [PairOrders(4).order("ab", r)
    ...                                             for r in range(1, 5)]
    True
    >>> len({tuple(d.order("ab", r)) for r in range(1, 30)}), d.name
    (2, 'switching')
    """

    seed: int
    name: str = "switching"

    def order[T](self, units: Sequence[T], round_no: int) -> list[T]:
        rng = np.random.default_rng([self.seed, round_no])
        return [units[int(i)] for i in rng.permutation(len(units))]


@dataclass(frozen=True)
class Window:
    """The whole epoch seconds a period measures: from `first` through `last` (inclusive)."""

    first: int
    last: int

    @property
    def seconds(self) -> int:
        return max(0, self.last - self.first + 1)

    def holds(self, t: int) -> bool:
        return self.first <= t <= self.last


def period_end(begun: float, switched_at: float, period_s: int, burn_in_s: float) -> float:
    """When a period ends (epoch seconds): a whole second, about `period_s` after its switch
    began (`begun`), so that its last measured second ends just before the next switch
    starts; and never before one whole second after its burn-in (a slow switch lengthens
    the period instead of leaving it nothing to measure).

    Ending on whole seconds is what makes short periods pay: pgbench stamps a transaction
    with the second it completed in, so a period measures only whole seconds, and an end in
    mid-second would waste the rest of it. With the default burn-in (0.5 s) the switch's own
    second is the one dropped (the look after a round and the reload fit in it), and a
    period of 3 s measures 2.

    >>> period_end(100.2, 100.3, 3, 0.5)  # switch at 100.3: measured 101 and 102
    103
    >>> period_end(100.2, 101.1, 3, 0.5)  # a slow switch: 102 is measured, not nothing
    103
    >>> period_end(100.2, 101.6, 3, 0.5)
    104
    """
    return max(round(begun + period_s), math.ceil(switched_at + burn_in_s) + 1)


def measured_window(switched_at: float, ended_at: float, burn_in_s: float) -> Window:
    """The whole seconds of a period left after its burn-in: a second counts when it starts at
    least `burn_in_s` after the switch took effect (`switched_at`, epoch seconds) and ends by
    the next switch (`ended_at`). pgbench's log stamps each transaction with the second it
    completed in, so a second of the window holds only transactions of this set's period.

    >>> measured_window(100.4, 110.6, 2.0)
    Window(first=103, last=109)
    >>> measured_window(100.0, 110.0, 2.0).seconds
    8
    >>> measured_window(100.0, 101.5, 2.0).seconds
    0
    """
    return Window(math.ceil(switched_at + burn_in_s), math.floor(ended_at) - 1)


def plan_design(
    plan: Plan,
    checked: Sequence[CheckedSet],
    meta_for: MetaLoader,
    spec: BenchSpec,
    refusal: str | None = None,
) -> Choice:
    """The design `compare` runs for `plan` (and `plan check` says it will): the plan's
    `[matrix] design`, with "auto" switching inside one run when the plan qualifies and its
    rounds are adaptive (a fixed `repeats` asks for that many runs of `duration` per set).
    `refusal` says why this invocation cannot switch (`--resume`, `--dsn`)."""
    matrix = plan.spec.matrix
    where = plan.where(("matrix", "design"))
    if refusal is not None and matrix.design != "runs":
        if matrix.design == "inside":
            raise UsageError(f'{where}: "inside" cannot switch inside one run: {refusal}.')
        return Choice("runs", refusal)
    if matrix.design == "runs" or not checked:
        return choose_design("runs", Qualification(False, ""))
    if matrix.design == "auto" and spec.adaptive is None:
        return Choice(
            "runs",
            "a fixed number of repeats asks for runs of the plan's duration; with precision or "
            "budget (adaptive rounds) a plan whose sets change only reload settings that act "
            "at once switches inside one run",
        )
    shape = PlanShape(spec.dataset, run_count(spec.model_copy(update={"repeats": 1})),
                      spec.protocol)  # fmt: skip
    found = qualify(checked, meta_for(checked[0].binaries), shape)
    return choose_design(matrix.design, found, where=where)
