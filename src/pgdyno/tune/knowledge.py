"""pgdyno's tuning knowledge (`data/tune.toml`): read, vetted, and evaluated against facts.

Entries use the doctor's expression language, so a data file cannot run code, and they name
the doctor rules that judge the same setting: the rules' evidence is the entry's evidence (one
knowledge base, not two). Evaluation is pure: `evaluate(facts, devices)` gives each entry's
value or the fact it lacked; `pgdyno.tune.recommend` turns that into a `Configuration`.
"""

from __future__ import annotations

import ast
import math
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pgdyno.doctor.rules import Rule, load_rules
from pgdyno.expressions import expr
from pgdyno.expressions.load import FactNames, KnowledgeFileError, Source, read
from pgdyno.records.tune import DEVICE_FACTS, FACT_FIELDS
from pgdyno.tune.model import Group, KnowledgeStatus, Layer

Format = Literal["size", "bytes", "number", "text"]
KNOWLEDGE_FILE = Path(str(resources.files("pgdyno") / "data" / "tune.toml"))


GUIDE = "docs/tune.md (the knowledge format)"
# The facts an entry may ask of `t` and of `device` (each disk a device entry is computed
# for): the fields of records/tune.py's TuneFacts and Disk, so a name that is not a field is
# refused when the file is read (the header of data/tune.toml says what each is).
FACT_NAMES: FactNames = {"t": frozenset(FACT_FIELDS), "device": frozenset(DEVICE_FACTS)}


class KnowledgeError(KnowledgeFileError):
    """data/tune.toml is malformed: names the line and key."""


class EntrySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    key: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    layer: Layer
    name: str | None = None  # defaults to key
    when: str | None = None
    value: str
    format: Format
    why: str = Field(min_length=20)
    rules: list[str] = []
    evidence: list[str] = []
    status: KnowledgeStatus = "apply"
    group: Group = "performance"
    # A value above the target's maximum (pg_settings.max_val): left out ("drop", the default),
    # or written as the maximum ("cap"), for settings where the maximum is as good (estimates).
    above_max: Literal["drop", "cap"] = "drop"
    values: dict[str, str] = {}


class KnowledgeFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    setting: list[EntrySpec]


@dataclass(frozen=True)
class Entry:
    spec: EntrySpec
    when: ast.expr | None
    value: ast.expr
    values: tuple[tuple[str, ast.expr], ...]
    evidence: tuple[str, ...]  # the entry's own, then its rules'

    @property
    def name(self) -> str:
        return self.spec.name or self.spec.key


@dataclass(frozen=True)
class Outcome:
    """An entry's result: `value` in base units (bytes, or as computed), or the missing fact."""

    entry: Entry
    value: Any = None
    missing: str | None = None
    device: str | None = None  # for device entries: the disk it is for
    values: Mapping[str, Any] = field(default_factory=dict)  # the entry's `values`, computed

    @property
    def why(self) -> str:
        """The entry's reason with its `{name}` placeholders filled from its values.

        >>> spec = EntrySpec(key="k", layer="host", value="1", format="number",
        ...                  why="measured {ns} ns per read", values={"ns": "1"})
        >>> Outcome(Entry(spec, None, ast.Constant(1), (), ()), 1, values={"ns": 29.9}).why
        'measured 29.9 ns per read'
        """
        text = self.entry.spec.why
        if not _placeholders(text):
            return text
        return text.format_map({name: self.values[name] for name in _placeholders(text)})


@cache
def load_knowledge(path: Path = KNOWLEDGE_FILE) -> tuple[Entry, ...]:
    parsed, source = read(path, KnowledgeFile, guide=GUIDE, error=KnowledgeError, entry_key="key")
    rules = {rule.id: rule for rule in load_rules()}
    names = {"t", "device"}
    entries: list[Entry] = []
    for index, spec in enumerate(parsed.setting):
        entries.append(_vet(source, index, spec, names, rules))
        names.add(spec.key)
    return tuple(entries)


def _vet(
    source: Source, index: int, spec: EntrySpec, names: set[str], rules: Mapping[str, Rule]
) -> Entry:
    local = set(names)

    def parse(key: Sequence[str | int], text: str) -> ast.expr:
        return source.expression(["setting", index, *key], text, local, FACT_NAMES)

    values = []
    for name, text in spec.values.items():
        values.append((name, parse(["values", name], text)))
        local.add(name)
    for name in _placeholders(spec.why):
        if name not in spec.values:
            source.fail(["setting", index, "why"], f"{{{name}}} is none of the entry's values")
    for position, rule in enumerate(spec.rules):
        if rule not in rules:
            source.fail(["setting", index, "rules", position], f"no doctor rule {rule!r} exists")
    cited = [item for rule in spec.rules for item in rules[rule].spec.evidence]
    evidence = tuple(dict.fromkeys([*spec.evidence, *cited]))
    if not evidence:
        source.fail(["setting", index], "neither rules nor evidence say why")
    return Entry(
        spec=spec,
        when=parse(["when"], spec.when) if spec.when else None,
        value=parse(["value"], spec.value),
        values=tuple(values),
        evidence=evidence,
    )


def evaluate(
    entries: Sequence[Entry], facts: Mapping[str, Any], devices: Mapping[str, Mapping[str, Any]]
) -> list[Outcome]:
    """Every entry against the facts (`t`); device entries once per disk in `devices`.

    An entry left out by `when` gives no outcome, and neither does a later one that uses it
    (vm.nr_hugepages without huge_pages); one that needs an unknown fact gives an outcome with
    `missing` set, and later entries that use it are unknown in turn.
    """
    scope: dict[str, Any] = {"t": expr.Facts("t", facts)}
    outcomes: list[Outcome] = []
    left_out: set[str] = set()
    for entry in entries:
        if entry.spec.layer == "device":
            for disk, device in devices.items():
                local = {**scope, "device": expr.Facts("device", device)}
                outcome = _one(entry, local, disk, left_out)
                if outcome is not None:
                    outcomes.append(outcome)
            continue
        outcome = _one(entry, scope, None, left_out)
        if outcome is None:
            left_out.add(entry.spec.key)
        else:
            outcomes.append(outcome)
            if outcome.missing is None:
                scope[entry.spec.key] = outcome.value
    return outcomes


def _one(
    entry: Entry, scope: Mapping[str, Any], disk: str | None, left_out: set[str]
) -> Outcome | None:
    local = dict(scope)
    try:
        if entry.when is not None and not expr.evaluate(entry.when, local):
            return None
        for name, node in entry.values:
            local[name] = expr.evaluate(node, local)
        value = expr.evaluate(entry.value, local)
    except expr.Unknown as exc:
        return Outcome(entry, missing=exc.name, device=disk)
    except expr.ExprError as exc:
        # An earlier entry this one uses was left out (then so is this one) or is unknown
        # (then this one is unknown in turn).
        name = _name_in(str(exc))
        return None if name in left_out else Outcome(entry, missing=name, device=disk)
    computed = {name: local[name] for name, _ in entry.values}
    return Outcome(entry, value=value, device=disk, values=computed)


def _placeholders(text: str) -> list[str]:
    """The `{name}` placeholders of a reason.

    >>> _placeholders("measured {ns} ns: {verdict}"), _placeholders("no braces")
    (['ns', 'verdict'], [])
    """
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def _name_in(message: str) -> str:
    return message.split("'")[1] if "'" in message else message


def render(value: Any, fmt: Format) -> str:
    """A computed value as the target writes it.

    >>> render(4 * 1024**3, "size"), render(20992 * 1024, "size"), render(1.1, "number")
    ('4GB', '20992kB', '1.1')
    >>> render(67108864, "bytes"), render(300, "number"), render("on", "text")
    ('67108864', '300', 'on')
    >>> render(2.0, "number")
    '2'
    """
    if fmt == "size":
        return expr.pg_size(int(value))
    if fmt == "bytes":
        return str(int(value))
    if fmt == "number":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return str(int(value))
        return str(value)
    return str(value)
