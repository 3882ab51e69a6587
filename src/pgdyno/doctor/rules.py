"""The doctor's rule base: TOML files under `doctor/rules/`, one per layer, read and vetted here.

A rule names a condition on the facts of a snapshot and, when it holds, what to tell the DBA:
the current value, the recommended one (computed from the facts), why, the evidence, the exact
fix, and when the fix takes effect. docs/doctor.md explains the format for reviewers.
"""

from __future__ import annotations

import ast
import string
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pgdyno.doctor import expr
from pgdyno.doctor.snapshot import NAMESPACES
from pgdyno.errors import PgdynoError
from pgdyno.plan.load import describe_location

LAYERS = ("cpu", "memory", "storage", "filesystem", "kernel", "postgresql")
SEVERITIES = ("info", "warning", "critical")
Layer = Literal["cpu", "memory", "storage", "filesystem", "kernel", "postgresql"]
Severity = Literal["info", "warning", "critical"]
TakesEffect = Literal["now", "reload", "restart", "reboot"]


class RuleError(PgdynoError):
    """A rule file is malformed: names the file, line and key."""


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    layer: Layer
    severity: Severity
    title: str = Field(min_length=5)
    when: str
    current: str
    recommended: str
    rationale: str = Field(min_length=20)
    evidence: list[str] = Field(min_length=1)
    fix: str = Field(min_length=1)
    takes_effect: TakesEffect
    persist: str | None = None  # how the fix survives a reboot, when `fix` does not
    caveats: str | None = None
    values: dict[str, str] = Field(default_factory=dict)

    @field_validator("evidence")
    @classmethod
    def _cited(cls, evidence: list[str]) -> list[str]:
        for item in evidence:
            if len(item) < 10:
                raise ValueError(f"evidence {item!r} does not say where it comes from")
        return evidence


class RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    rule: list[RuleSpec]


@dataclass(frozen=True)
class Rule:
    """A vetted rule: its text, and its expressions parsed once."""

    spec: RuleSpec
    when: ast.expr
    current: ast.expr
    recommended: ast.expr
    values: tuple[tuple[str, ast.expr], ...]

    @property
    def id(self) -> str:
        return self.spec.id


def rules_dir() -> Path:
    return Path(str(resources.files("pgdyno.doctor") / "rules"))


def load_rules(directory: Path | None = None) -> list[Rule]:
    """Every rule, in layer order then file order; RuleError on the first problem."""
    files = sorted((directory or rules_dir()).glob("*.toml"))
    rules = [rule for file in files for rule in load_rule_file(file)]
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise RuleError(f"rule id {rule.id!r} is used twice; rule ids must be unique.")
        seen.add(rule.id)
    return sorted(rules, key=lambda rule: LAYERS.index(rule.spec.layer))


def load_rule_file(file: Path) -> list[Rule]:
    text = file.read_text(encoding="utf-8")
    try:
        parsed = RuleFile.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{file} is not valid TOML: {exc}.") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = describe_location(file, text, list(error["loc"]))
        raise RuleError(f"{where}: {error['msg']}.") from None
    return [_vet(file, text, index, spec) for index, spec in enumerate(parsed.rule)]


def _vet(file: Path, text: str, index: int, spec: RuleSpec) -> Rule:
    names = set(NAMESPACES)
    values: list[tuple[str, ast.expr]] = []

    def parse(key: Sequence[str | int], source: str) -> ast.expr:
        try:
            return expr.parse(source, frozenset(names))
        except expr.ExprError as exc:
            where = describe_location(file, text, ["rule", index, *key])
            raise RuleError(f"{where} (rule {spec.id}): {exc}.") from None

    for name, source in spec.values.items():
        values.append((name, parse(["values", name], source)))
        names.add(name)  # a value may use the ones before it
    rule = Rule(
        spec,
        when=parse(["when"], spec.when),
        current=parse(["current"], spec.current),
        recommended=parse(["recommended"], spec.recommended),
        values=tuple(values),
    )
    known = {"current", "recommended", *spec.values}
    for key, template in (("fix", spec.fix), ("persist", spec.persist or "")):
        for _, field, _, _ in string.Formatter().parse(template):
            if field is not None and field not in known:
                where = describe_location(file, text, ["rule", index, key])
                raise RuleError(
                    f"{where} (rule {spec.id}): {{{field}}} is neither current, recommended "
                    "nor one of the rule's values."
                )
    return rule
