"""Rules against a snapshot: what fired, what passed, what could not be checked.

Pure but for reading pgdyno's recorded catalog of PostgreSQL defaults (doctor/defaults.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pgdyno.doctor.defaults import AssumedDefault, note, with_defaults
from pgdyno.doctor.rules import SEVERITIES, Rule
from pgdyno.doctor.snapshot import scope
from pgdyno.expressions import expr


@dataclass(frozen=True)
class Finding:
    rule: Rule
    current: str
    recommended: str
    fix: str
    persist: str | None
    # Settings the rule read that the snapshot left out, taken as their version's defaults
    # (doctor/defaults.py); `current` then ends with a note naming them.
    assumed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unchecked:
    rule: Rule
    missing: str  # the dotted name of the first fact the rule needed and did not have
    problem: str | None = None  # set when the facts were there but could not be used


@dataclass(frozen=True)
class Held:
    """A finding held back: a rule it comes `after` fired, and its fix changes what this one
    rests on (a cut shared_buffers changes the worst case of memory and the huge pages)."""

    finding: Finding
    waits_for: tuple[str, ...]  # the fired rules whose fix comes first, by id


@dataclass(frozen=True)
class Audit:
    findings: list[Finding] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    passed: list[Rule] = field(default_factory=list)
    unchecked: list[Unchecked] = field(default_factory=list)
    # Defaults a finding or a passed rule rested on, by setting; and which rules read each.
    assumed: dict[str, AssumedDefault] = field(default_factory=dict)
    assumed_by: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def at_least(self, severity: str) -> list[Finding]:
        floor = SEVERITIES.index(severity)
        return [f for f in self.findings if SEVERITIES.index(f.rule.spec.severity) >= floor]


def display(value: Any) -> str:
    """A fact or computed value as a DBA reads it.

    >>> display(True), display(0.9), display(2.0), display((3, 2, 0)), display("never")
    ('on', '0.9', '2', '3.2.0', 'never')
    """
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ".".join(str(part) for part in value)
    return str(value)


def audit(rules: Sequence[Rule], snapshot: Mapping[str, Any]) -> Audit:
    """Every rule against the snapshot; settings it leaves out are taken as the defaults of
    the server's version when that is known (doctor/defaults.py), and named."""
    filled, defaults = with_defaults(snapshot)
    facts = scope(filled)
    result = Audit()
    for rule in rules:
        read: set[str] = set()
        try:
            finding = check(rule, {**facts, "pg": facts["pg"].watched(read)})
        except expr.Unknown as exc:
            result.unchecked.append(Unchecked(rule, exc.name))
            continue
        except expr.ExprError as exc:  # a hand-written snapshot with a value of another type
            result.unchecked.append(Unchecked(rule, "", f"a fact has an unexpected value ({exc})"))
            continue
        used = tuple(sorted(read & defaults.keys()))
        if used:
            result.assumed_by[rule.id] = used
            result.assumed.update((name, defaults[name]) for name in used)
        if finding is None:
            result.passed.append(rule)
        else:
            shown = f"{finding.current} {note([defaults[name] for name in used])}".strip()
            result.findings.append(replace(finding, current=shown, assumed=used))
    result.findings.sort(key=lambda f: -SEVERITIES.index(f.rule.spec.severity))
    return _hold_dependents(result)


def _hold_dependents(result: Audit) -> Audit:
    """Findings whose rule comes `after` one that fired are held back, so the first fix comes
    first and no finding asks for what another one's fix undoes."""
    fired = {f.rule.id for f in result.findings}
    kept: list[Finding] = []
    held: list[Held] = []
    for finding in result.findings:
        waits_for = tuple(rule for rule in finding.rule.spec.after if rule in fired)
        if waits_for:
            held.append(Held(finding, waits_for))
        else:
            kept.append(finding)
    return replace(result, findings=kept, held=held)


def check(rule: Rule, facts: Mapping[str, Any]) -> Finding | None:
    """The finding when the rule's condition holds; raises expr.Unknown when it cannot tell."""
    names = _Strict(facts)
    for name, node in rule.values:
        try:
            names[name] = expr.evaluate(node, names)
        except expr.Unknown as exc:
            names[name] = exc  # raised again only if the condition or the fix uses it
    if not expr.evaluate(rule.when, names):
        return None
    shown = {
        name: display(value)
        for name, value in dict.items(names)
        if name not in facts and not isinstance(value, expr.Unknown)
    }
    shown["current"] = display(expr.evaluate(rule.current, names))
    shown["recommended"] = display(expr.evaluate(rule.recommended, names))
    spec = rule.spec
    try:
        fix = spec.fix.format_map(shown)
        persist = spec.persist.format_map(shown) if spec.persist else None
    except KeyError as exc:  # the fix needs a value that rests on an unknown fact
        raise dict.__getitem__(names, exc.args[0]) from None
    return Finding(rule, shown["current"], shown["recommended"], fix.strip(), persist)


class _Strict(dict[str, Any]):
    """Names whose value is an Unknown raise it when an expression reads them."""

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        if isinstance(value, expr.Unknown):
            raise value
        return value
