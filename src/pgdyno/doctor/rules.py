"""The doctor's rule base: TOML files under `doctor/rules/`, one per layer, read and vetted here.

A rule names a condition on the facts of a snapshot and, when it holds, what to tell the DBA:
the current value, the recommended one (computed from the facts), why, the evidence, the exact
fix, and when the fix takes effect. docs/doctor.md explains the format for reviewers.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pgdyno.doctor.snapshot import NAMESPACES
from pgdyno.doctor.snapshot_doc import gathered_fields
from pgdyno.expressions.load import FactNames, KnowledgeFileError, Source, check_names, read

LAYERS = ("cpu", "memory", "storage", "filesystem", "kernel", "postgresql")
SEVERITIES = ("info", "warning", "critical")
RuleLayer = Literal["cpu", "memory", "storage", "filesystem", "kernel", "postgresql"]
Severity = Literal["info", "warning", "critical"]
TakesEffect = Literal["now", "reload", "restart", "reboot"]


GUIDE = "docs/doctor.md (the rule format)"


class RuleError(KnowledgeFileError):
    """A rule file is malformed: names the file, line and key."""


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    layer: RuleLayer
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
    # Rules whose fix comes first: while one of them fires, this rule's finding rests on a value
    # that fix changes, so it is held back (named, not shown as a finding) until then.
    after: list[str] = Field(default_factory=list)

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


@cache
def fact_names() -> FactNames:
    """The facts a rule may ask of each namespace: what the doctor gathers and
    data/doctor_snapshot.toml describes; any setting of `pg` and `pg_source`."""
    gathered = gathered_fields()
    device = frozenset(gathered["devices"])
    return {
        "host": frozenset({*gathered["host"], "kernel_version"}),
        "data": device,
        "wal": device,
        "devices": frozenset({"data", "wal", "wal_on_data_device"}),
        "server": frozenset({*gathered["server"], "pending_restart"}),
        "pg": None,
        "pg_source": None,
    }


def load_rules(directory: Path | None = None) -> list[Rule]:
    """Every rule, in layer order then file order; RuleError on the first problem."""
    files = sorted((directory or rules_dir()).glob("*.toml"))
    seen: set[str] = set()
    rules: list[Rule] = []
    for file in files:
        parsed, source = _read(file)
        for index, spec in enumerate(parsed.rule):
            if spec.id in seen:
                source.fail(["rule", index, "id"], f"rule id {spec.id!r} is used twice, and "
                            "rule ids must be unique")  # fmt: skip
            seen.add(spec.id)
            rules.append(_vet(source, index, spec))
    for rule in rules:
        unknown = [rule_id for rule_id in rule.spec.after if rule_id not in seen]
        if unknown:
            raise RuleError(f"rule {rule.id!r}: after names no rule {unknown[0]!r}; see {GUIDE}.")
    return sorted(rules, key=lambda rule: LAYERS.index(rule.spec.layer))


def load_rule_file(file: Path) -> list[Rule]:
    parsed, source = _read(file)
    return [_vet(source, index, spec) for index, spec in enumerate(parsed.rule)]


def _read(file: Path) -> tuple[RuleFile, Source]:
    return read(file, RuleFile, guide=GUIDE, error=RuleError, entry_key="id")


def _vet(source: Source, index: int, spec: RuleSpec) -> Rule:
    names = set(NAMESPACES)
    facts = fact_names()

    def parse(key: Sequence[str | int], text: str) -> ast.expr:
        return source.expression(["rule", index, *key], text, names, facts)

    values: list[tuple[str, ast.expr]] = []
    for name, text in spec.values.items():
        values.append((name, parse(["values", name], text)))
        names.add(name)  # a value may use the ones before it
    rule = Rule(
        spec,
        when=parse(["when"], spec.when),
        current=parse(["current"], spec.current),
        recommended=parse(["recommended"], spec.recommended),
        values=tuple(values),
    )
    known = ("current", "recommended", *spec.values)
    for key, template in (("fix", spec.fix), ("persist", spec.persist or "")):
        check_names(source, ["rule", index, key], template, known,
                    "current, recommended nor one of the rule's values")  # fmt: skip
    return rule
