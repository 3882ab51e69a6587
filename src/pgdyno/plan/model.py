"""The plan file's shape: configuration sets, the matrix they run, the baseline (pure).

Only the form is checked here (keys, types, ranges, names that must match). Whether a
PostgreSQL setting or a sysctl exists on the target is checked by :mod:`pgdyno.plan.check`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Scalar = str | int | float | bool
SET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$"
PG_MAJORS = (14, 15, 16, 17, 18)

# Strict: TOML has real types, so "2" where a number belongs is an error, not a conversion.
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


class BlockSpec(BaseModel):
    """Queue settings of the block device under the PostgreSQL data directory."""

    model_config = _STRICT

    scheduler: str | None = None
    read_ahead_kb: Annotated[int, Field(ge=0, le=1 << 20)] | None = None


class SetSpec(BaseModel):
    """One configuration set: what is changed, against the defaults, for its runs."""

    model_config = _STRICT

    name: Annotated[str, Field(pattern=SET_NAME)]
    description: str | None = None
    pg: dict[str, Scalar] = {}
    sysctl: dict[str, Scalar] = {}
    block: BlockSpec = BlockSpec()
    pg_version: Literal[14, 15, 16, 17, 18] | None = None
    pg_bin: str | None = None

    @model_validator(mode="after")
    def _one_binary_source(self) -> SetSpec:
        if self.pg_version is not None and self.pg_bin is not None:
            raise ValueError("give pg_version or pg_bin, not both")
        return self

    @property
    def block_settings(self) -> dict[str, Scalar]:
        return {k: v for k, v in self.block.model_dump().items() if v is not None}


class MatrixSpec(BaseModel):
    """What every set runs: the same pgbench cells, repeated and interleaved."""

    model_config = _STRICT

    workloads: Annotated[list[str], Field(min_length=1)]
    scales: Annotated[list[str | int], Field(min_length=1)]
    clients: Annotated[list[Annotated[int, Field(ge=1, le=10000)]], Field(min_length=1)]
    jobs: str = "auto"
    duration: Annotated[int, Field(ge=1, le=86400)] = 30
    repeats: Annotated[int, Field(ge=1, le=100)] = 3
    warmup: Annotated[int, Field(ge=0, le=3600)] = 5
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    rate: Annotated[float, Field(gt=0)] | None = None
    latency_limit: Annotated[float, Field(gt=0)] | None = None
    latency_log: str = "auto"
    prewarm: bool = False
    per_statement: bool = False
    progress: bool = False


class PlanSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    name: str | None = None
    description: str | None = None
    mode: Literal["sets", "ladder"] = "sets"
    baseline: str | None = None
    pg_version: Literal[14, 15, 16, 17, 18] | None = None
    pg_bin: str | None = None
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
    >>> b = SetSpec(name="b", pg={"shared_buffers": "1GB"}, sysctl={"vm.dirty_ratio": 5})
    >>> [dict(s.pg) for s in cumulative([a, b])]
    [{'work_mem': '4MB'}, {'work_mem': '4MB', 'shared_buffers': '1GB'}]
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
