"""The plan file's shape: configuration sets, the matrix they run, the baseline (pure).

Only the form is checked here (keys, types, ranges, names that must match). Whether a
PostgreSQL setting or a sysctl exists on the target is checked by :mod:`pgdyno.plan.check`.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, model_validator

from pgdyno.collect.waits import DEFAULT_HZ, MAX_HZ
from pgdyno.storage.model import ROLE_MAX, ROLE_RULE, is_plain_role, set_role

SET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$"
PG_MAJORS = (14, 15, 16, 17, 18)
# The widest integer any value goes to: the kernel's unsigned long / PostgreSQL's int64.
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1
MAX_VALUE_CHARS = 4096
# Switching inside one run (matrix.design): seconds per period, seconds dropped after each
# switch, and the fewest whole seconds a period must keep after it (its figures are means of
# its seconds; fewer would make each mostly noise). 5 s and 1 s: a reload measurably cost the
# load nothing after 100 ms here (benchmarks/reload_dip.py), and the A/A of
# tests/unit/test_switching_sim.py holds at 5 s/1 s under a 30% dip fading in 0.5 s after
# every switch; 5 s periods cut a reload-only A/A's machine time by 30-50% against 10 s
# (docs/statistics.md, "Switching inside one run").
# Switching inside one run: 3 s periods, the switch's own second dropped (a burn-in of 0.5 s
# after the reload took effect). Cut from the same pgbench run, they needed 0.50-0.89 of the
# machine time per verdict of 5 s periods (docs/benchmarks.md, "Which period length").
DEFAULT_PERIOD_S = 3
DEFAULT_BURN_IN_S = 0.5

# Control characters (C0, DEL, C1) would reach a terminal, a log or postgresql.conf as they are.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_VALUE_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # a value is one line
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,127}")


def _text(value: str) -> str:
    """Plan text (names, descriptions): tabs and newlines only.

    >>> _text("a\\tb")
    'a\\tb'
    """
    if match := _CONTROL.search(value):
        raise ValueError(f"the text contains the control character {match.group()!r}; remove it")
    return value


def _key(name: str) -> str:
    """A setting name as a table key: letters, digits and _ . : / @ + - only."""
    if not _KEY.fullmatch(name):
        raise ValueError(f"{name!r} is not a setting name (letters, digits and _ . : / @ + - only)")
    return name


def _scalar(value: object) -> str | int | float | bool:
    """A setting's value: one line of text, a finite number, a 64-bit integer or a boolean.

    >>> _scalar(4), _scalar("4MB"), _scalar(True)
    (4, '4MB', True)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError(
                f"a whole number of {len(str(abs(value)))} digits is beyond any setting's range "
                "(64 bits); use a real value"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number; give a real value")
        return value
    if isinstance(value, str):
        if match := _VALUE_CONTROL.search(value):
            raise ValueError(
                f"the value contains the control character {match.group()!r}; a setting's "
                "value is one line of printable text"
            )
        if len(value) > MAX_VALUE_CHARS:
            raise ValueError(f"the value is longer than {MAX_VALUE_CHARS} characters; shorten it")
        return value
    shown = type(value).__name__ if isinstance(value, list | dict) else repr(value)
    raise ValueError(f"a setting takes one value (a string, number or boolean), not a {shown}")


def _scale(value: object) -> str | int:
    """A scale: a name or number as text (pgbench.scale reads it), or a whole number that fits
    pgbench's C int."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value > 2**31 - 1:
            raise ValueError(f"{value} is more than pgbench's largest scale, {2**31 - 1}")
        return value
    raise ValueError(f"a scale is a whole number or a name such as small, not {value!r}")


Text = Annotated[str, AfterValidator(_text)]
Scale = Annotated[str | int, PlainValidator(_scale)]
Key = Annotated[str, AfterValidator(_key)]
Scalar = Annotated[str | int | float | bool, PlainValidator(_scalar)]

# Strict: TOML has real types, so "2" where a number belongs is an error, not a conversion.
# inf and nan are TOML floats too: no value of a plan may be one.
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class BlockSpec(BaseModel):
    """Queue settings of the block device under the PostgreSQL data directory."""

    model_config = _STRICT

    scheduler: Text | None = None
    read_ahead_kb: Annotated[int, Field(ge=0, le=1 << 20)] | None = None


class ThpSpec(BaseModel):
    """Transparent huge pages: /sys/kernel/mm/transparent_hugepage/{enabled,defrag}. Each is
    one word the file offers ("never", "madvise", ...), checked against the live file."""

    model_config = _STRICT

    enabled: Text | None = None
    defrag: Text | None = None


FILESYSTEMS = ("ext4", "xfs", "btrfs", "ext3")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MOUNT_OPTION = re.compile(r"^[A-Za-z0-9_=.:/+-]+$")


def parse_size(text: str) -> int:
    """A size in bytes from "8GB", "512MiB", "2T" (powers of 1024, as df and losetup count).

    >>> parse_size("8GB"), parse_size("512 MiB"), parse_size("1.5G")
    (8589934592, 536870912, 1610612736)
    >>> parse_size("9" * 400) > MAX_IMAGE_BYTES  # exact: no float to overflow
    True
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size; write it as 8GB, 512MB or 2TB")
    unit = (match[2] or "").upper().rstrip("B").rstrip("I") if match[2] else ""
    return int(Decimal(match[1]) * _UNITS[unit or "B"])


# The largest file Linux can hold (an off_t): no loop image can be larger.
MAX_IMAGE_BYTES = (1 << 63) - 1


def _size(value: str) -> str:
    size = parse_size(value)
    if size < 64 << 20:
        raise ValueError(f"{value} is too small for a filesystem; give at least 64MB")
    if size > MAX_IMAGE_BYTES:
        shown = value if len(value) <= 24 else f"{value[:12]}...({len(value)} characters)"
        raise ValueError(f"{shown} is larger than any file can be; give a size such as 8GB")
    return value


def _mount_options(value: str) -> str:
    for option in filter(None, value.split(",")):
        if not _MOUNT_OPTION.match(option):
            raise ValueError(f"mount option {option!r} holds a character mount does not take")
    return value


def _mkfs_option(value: str) -> str:
    if not value or value != value.strip() or _CONTROL.search(value):
        raise ValueError(f"{value!r} is not one mkfs argument (one word per list item)")
    return value


class FsSpec(BaseModel):
    """A filesystem pgdyno builds for a set (as root): on a loop image in its work directory,
    or on a block device named with `device` and `destroy_device = true`."""

    model_config = _STRICT

    filesystem: Literal["ext4", "xfs", "btrfs", "ext3"]
    mkfs_options: list[Annotated[str, AfterValidator(_mkfs_option)]] = []
    mount_options: Annotated[str, AfterValidator(_mount_options)] = ""
    size: Annotated[str, AfterValidator(_size)] | None = None
    device: Text | None = None
    destroy_device: bool = False

    @model_validator(mode="after")
    def _device_or_image(self) -> FsSpec:
        if self.device is not None and not self.device.startswith("/dev/"):
            raise ValueError(f"device {self.device!r} is not under /dev; name a block device")
        if self.device is not None and self.size is not None:
            raise ValueError("give a device or a size for the loop image, not both")
        if self.destroy_device and self.device is None:
            raise ValueError("destroy_device goes with device (a loop image needs no consent)")
        return self


class StorageSpec(FsSpec):
    """[set.storage]: the filesystem under the data directory, and optionally `wal`: pg_wal on
    a filesystem (or device) of its own."""

    wal: FsSpec | None = None


class SetSpec(BaseModel):
    """One configuration set: what is changed, against the defaults, for its runs."""

    model_config = _STRICT

    name: Annotated[str, Field(pattern=SET_NAME)]
    description: Text | None = None
    pg: dict[Key, Scalar] = {}
    sysctl: dict[Key, Scalar] = {}
    block: BlockSpec = BlockSpec()
    thp: ThpSpec = ThpSpec()
    storage: StorageSpec | None = None
    pg_version: Literal[14, 15, 16, 17, 18] | None = None
    pg_bin: Text | None = None

    @model_validator(mode="after")
    def _one_binary_source(self) -> SetSpec:
        if self.pg_version is not None and self.pg_bin is not None:
            raise ValueError("give pg_version or pg_bin, not both")
        return self

    @model_validator(mode="after")
    def _storage_name(self) -> SetSpec:
        """A storage set's name names its filesystems (`storage/<name>-data.img`, the mount
        point), so it follows storage/model.py's rule for those: checked here, when the plan is
        read, not when the filesystem is built."""
        if self.storage is not None and not is_plain_role(set_role(self.name, "data")):
            longest = ROLE_MAX - len(set_role("", "data"))
            suggestion = re.sub(r"[^a-z0-9_-]", "-", self.name.lower())
            if not suggestion[:1].isalpha():
                suggestion = f"fs-{suggestion}"
            raise ValueError(
                f"set name {self.name!r} names the filesystems of its [set.storage], so it takes "
                f"{ROLE_RULE}, at most {longest} characters: rename the set (e.g. "
                f"{suggestion[:longest]!r})"
            )
        return self

    @property
    def block_settings(self) -> dict[str, Scalar]:
        return {k: v for k, v in self.block.model_dump().items() if v is not None}

    @property
    def thp_settings(self) -> dict[str, str]:
        return {k: v for k, v in self.thp.model_dump().items() if v is not None}


class MatrixSpec(BaseModel):
    """What every set runs: the same pgbench cells, repeated and interleaved."""

    model_config = _STRICT

    workloads: Annotated[list[Text], Field(min_length=1, max_length=100)]
    scales: Annotated[list[Scale], Field(min_length=1, max_length=100)]
    clients: Annotated[
        list[Annotated[int, Field(ge=1, le=10000)]], Field(min_length=1, max_length=100)
    ]
    jobs: Text = "auto"
    duration: Annotated[int, Field(ge=1, le=86400)] = 30
    repeats: Annotated[int, Field(ge=1, le=100)] = 3
    warmup: Annotated[int, Field(ge=0, le=3600)] = 5
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    rate: Annotated[float, Field(gt=0)] | None = None
    latency_limit: Annotated[float, Field(gt=0)] | None = None
    latency_log: Text = "auto"
    prewarm: bool = False
    per_statement: bool = False
    progress: bool = False
    # Looks a second at the server's sessions for the wait-event profile (0: off; at most 50)
    wait_sample_hz: Annotated[int, Field(ge=0, le=MAX_HZ)] = DEFAULT_HZ
    # Sample the server's processes with perf for the on-CPU profile (docs/profiles.md); unset:
    # on, unless PGDYNO_CPU_PROFILE=off (collect/cpu_profile.py `wanted`)
    cpu_profile: bool | None = None
    # Adaptive rounds instead of a fixed `repeats`: rounds go on until every comparison's
    # interval is `precision` % wide each way (or decided), or `budget` ("20m") is spent.
    precision: Annotated[float, Field(gt=0, le=50)] | None = None
    budget: Text | None = None
    # The TPC-C-like workload (workloads = ["tpcc"]): every warehouse dealt to every client
    # instead of a home warehouse each; the specification's keying and think times.
    tpcc_all_warehouses: bool = False
    tpcc_keying: bool = False
    # A run is flagged, and left out of the verdicts, when other processes took more than this
    # % of the machine's CPU during it (default 5; --foreign-cpu-limit overrides it).
    foreign_cpu_limit: Annotated[float, Field(gt=0, le=100)] | None = None
    # The seed of the rounds' balanced orders (`compare --seed` overrides it): every host of a
    # fleet, and every later run of the plan, then runs the sets in the same orders.
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    # How the sets take turns (pgdyno.experiment.switching): "inside" one pgbench run, every
    # `period` seconds, `burn_in` seconds after each switch dropped; "runs": one run per set
    # and round; "auto": inside when every set changes only settings a reload makes current
    # at once (`plan check` says which and why); "twins": one sandbox per set, each started
    # once (pgdyno.experiment.twin_sets), which "auto" picks for sets that differ by settings
    # a restart makes current when their servers fit in memory side by side.
    design: Literal["auto", "inside", "runs", "twins"] = "auto"
    period: Annotated[int, Field(ge=2, le=3600)] = DEFAULT_PERIOD_S
    burn_in: Annotated[float, Field(ge=0, le=600)] = DEFAULT_BURN_IN_S
    # A capacity sweep of every set beside TPS (docs/capacity.md): the p99 target ("5ms"; none:
    # no sweep), the machine time all sets' sweeps share ("10m", split evenly), the seconds of
    # each step (one pgbench -R run) and the runs at each end of a capacity's interval.
    capacity_p99: Text | None = None
    capacity_budget: Text = "10m"
    capacity_step: Annotated[int, Field(ge=1, le=3600)] = 10
    capacity_repeats: Annotated[int, Field(ge=1, le=20)] = 5

    @model_validator(mode="after")
    def _capacity_sweeps_one_cell(self) -> MatrixSpec:
        cells = len(self.workloads) * len(self.scales) * len(self.clients)
        if self.capacity_p99 is not None and cells != 1:
            raise ValueError(
                f"capacity_p99 sweeps one cell and this matrix has {cells}: give one workload, "
                "one scale and one clients count"
            )
        return self

    @model_validator(mode="after")
    def _period_measures(self) -> MatrixSpec:
        """A period keeps a whole second after its burn-in: the switch lands inside a second,
        which is then not whole (pgdyno.experiment.switching.period_end)."""
        if self.period < math.ceil(self.burn_in) + 1:
            raise ValueError(
                f"a period of {self.period} s with a burn-in of {self.burn_in:g} s leaves no "
                f"whole second to measure: give a period of at least "
                f"{math.ceil(self.burn_in) + 1} s"
            )
        return self

    @model_validator(mode="after")
    def _repeats_or_adaptive(self) -> MatrixSpec:
        adaptive = self.precision is not None or self.budget is not None
        if adaptive and "repeats" in self.model_fields_set:
            raise ValueError(
                "give repeats (a fixed number of rounds) or precision/budget (adaptive rounds), "
                "not both"
            )
        return self


class PlanSpec(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, populate_by_name=True, allow_inf_nan=False
    )

    name: Text | None = None
    description: Text | None = None
    mode: Literal["sets", "ladder"] = "sets"
    baseline: Text | None = None
    pg_version: Literal[14, 15, 16, 17, 18] | None = None
    pg_bin: Text | None = None
    matrix: MatrixSpec
    sets: Annotated[list[SetSpec], Field(alias="set", min_length=2)]

    @model_validator(mode="after")
    def _names(self) -> PlanSpec:
        names = [s.name for s in self.sets]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"set names must differ; {', '.join(duplicates)} is used twice")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(
                f"baseline {self.baseline!r} is not a set; choose one of {', '.join(names)}"
            )
        if self.mode == "ladder" and self.baseline not in (None, names[0]):
            raise ValueError("a ladder's baseline is its first step; remove baseline")
        return self

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.sets[0].name


def cumulative(sets: list[SetSpec]) -> list[SetSpec]:
    """Ladder steps as applied: each step keeps every change of the steps before it.

    >>> a = SetSpec(name="a", pg={"work_mem": "4MB"})
    >>> b = SetSpec(name="b", pg={"shared_buffers": "1GB"}, thp={"enabled": "never"})
    >>> [dict(s.pg) for s in cumulative([a, b])]
    [{'work_mem': '4MB'}, {'work_mem': '4MB', 'shared_buffers': '1GB'}]
    >>> c = SetSpec(name="c", thp={"defrag": "madvise"})
    >>> cumulative([a, b, c])[-1].thp_settings
    {'enabled': 'never', 'defrag': 'madvise'}
    """
    steps: list[SetSpec] = []
    for step in sets:
        if steps:
            before = steps[-1]
            step = step.model_copy(
                update={
                    "pg": {**before.pg, **step.pg},
                    "sysctl": {**before.sysctl, **step.sysctl},
                    "block": BlockSpec.model_validate(
                        {**before.block_settings, **step.block_settings}
                    ),
                    "thp": ThpSpec.model_validate({**before.thp_settings, **step.thp_settings}),
                    "storage": step.storage or before.storage,
                }
            )
            if step.pg_version is None and step.pg_bin is None:
                step = step.model_copy(
                    update={"pg_version": before.pg_version, "pg_bin": before.pg_bin}
                )
        steps.append(step)
    return steps


def applied_sets(plan: PlanSpec) -> list[SetSpec]:
    """The sets as they run: ladders made cumulative, plan-wide binaries filled in."""
    sets = cumulative(plan.sets) if plan.mode == "ladder" else list(plan.sets)
    out = []
    for s in sets:
        if s.pg_version is None and s.pg_bin is None:
            s = s.model_copy(update={"pg_version": plan.pg_version, "pg_bin": plan.pg_bin})
        out.append(s)
    return out
