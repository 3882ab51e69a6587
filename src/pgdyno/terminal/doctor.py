"""The doctor's findings for a terminal (Rich renderables) and as JSON-ready data."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.text import Text

from pgdyno.doctor.evaluate import Audit, Finding, Held, Unchecked
from pgdyno.doctor.rules import LAYERS
from pgdyno.doctor.waits import WaitCitation
from pgdyno.textsafe import safe_text

STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
TAKES_EFFECT = {
    "now": "takes effect at once",
    "reload": "takes effect on a configuration reload",
    "restart": "takes effect after a PostgreSQL restart",
    "reboot": "takes effect after a reboot",
}


# Where the reason for a missing fact is recorded: rule names -> snapshot sections.
_SECTION = {"pg": "server.settings", "pg_source": "server.settings", "data": "devices.data",
            "wal": "devices.wal"}  # fmt: skip


def _reason(unchecked: Unchecked, unread: Mapping[str, str]) -> str:
    """Why a rule could not be checked: the unread entry of the fact or of a section above it."""
    if unchecked.problem:
        return unchecked.problem
    head, _, rest = unchecked.missing.partition(".")
    name = f"{_SECTION[head]}.{rest}" if head in _SECTION else unchecked.missing
    while name:
        if name in unread:
            return unread[name]
        name = name.rpartition(".")[0]
    return f"{unchecked.missing} is not in the snapshot"


def headline(snapshot: Mapping[str, Any]) -> str:
    host = snapshot.get("host") or {}
    server = snapshot.get("server") or {}
    parts = [str(snapshot.get("target") or "snapshot")]
    if host:
        memory = host.get("memory_bytes")
        limit = " (cgroup limit)" if host.get("memory_limit_bytes") else ""
        parts.append(f"kernel {host.get('kernel_release', '?')}")
        cpus = host.get("cpu_count")
        parts.append(f"{cpus if cpus is not None else '?'} CPUs")  # None: no CPU file read
        if memory:
            parts.append(f"{memory / 1024**3:.1f} GiB RAM{limit}")
        if host.get("virtualization"):
            parts.append(f"virtual ({host['virtualization']})")
    if server:
        parts.append(f"PostgreSQL {server.get('version', '?')}")
    parts.append(f"taken {snapshot.get('taken_at', '?')}")
    return " · ".join(parts)


def _finding(finding: Finding) -> RenderableType:
    spec = finding.rule.spec
    lines: list[RenderableType] = [
        Text.from_markup(
            f"[{STYLE[spec.severity]}]{spec.severity.upper():8}[/] [bold]{escape(spec.title)}"
            f"[/] [dim]({spec.id})[/]"
        ),
        Text.from_markup(
            f"  now: {escape(safe_text(finding.current))}   [green]recommended: "
            f"{escape(safe_text(finding.recommended))}[/]"
        ),
        Text(f"  why: {' '.join(spec.rationale.split())}", style="default"),
    ]
    lines += [Text(f"  evidence: {item}", style="dim") for item in spec.evidence]
    lines.append(Text(f"  fix ({TAKES_EFFECT[spec.takes_effect]}):"))
    # Facts from a snapshot file reach these lines: Text bypasses the console's own escaping.
    lines += [Text(f"    {safe_text(line)}", style="bold") for line in finding.fix.splitlines()]
    if finding.persist:
        lines.append(Text(f"  to keep it after a reboot: {safe_text(finding.persist)}"))
    if spec.caveats:
        lines.append(Text(f"  caveat: {' '.join(spec.caveats.split())}", style="magenta"))
    return Group(*lines, Text(""))


def render(audit: Audit, snapshot: Mapping[str, Any]) -> Iterator[RenderableType]:
    """Findings by layer, most severe first; one all-clear line for each layer that passes."""
    unread: Mapping[str, str] = snapshot.get("unread") or {}
    yield Text(f"pgdyno doctor: {safe_text(headline(snapshot))}", style="bold")
    if audit.assumed:
        values = ", ".join(f"{a.name} = {a.shown}" for a in audit.assumed.values())
        majors = "/".join(sorted({str(a.major) for a in audit.assumed.values()}))
        yield Text(f"not in the snapshot, taken as PostgreSQL {majors}'s defaults: "
                   f"{safe_text(values)}", style="dim")  # fmt: skip
    yield Text("")
    for layer in LAYERS:
        found = [f for f in audit.findings if f.rule.spec.layer == layer]
        passed = [r for r in audit.passed if r.spec.layer == layer]
        unchecked = [u for u in audit.unchecked if u.rule.spec.layer == layer]
        counts = f"{len(passed)} passed" + (f", {len(unchecked)} not checked" if unchecked else "")
        if found:
            yield Text(f"{layer}: {len(found)} finding(s) ({counts})", style="bold underline")
            for finding in found:
                yield _finding(finding)
        elif passed:
            yield Text.from_markup(f"[bold]{layer}:[/] [green]all clear[/] ({counts})")
        else:
            yield Text.from_markup(f"[bold]{layer}:[/] [dim]not checked[/]")
        layers = {f.rule.id: f.rule.spec.layer for f in audit.findings}
        for held in (h for h in audit.held if h.finding.rule.spec.layer == layer):
            yield _held(held, layers)
        reasons: dict[str, list[str]] = {}
        for item in unchecked:
            reasons.setdefault(_reason(item, unread), []).append(item.rule.id)
        for reason, ids in reasons.items():
            yield Text(f"  not checked: {', '.join(ids)}: {safe_text(reason)}", style="dim")
    yield Text("")
    by_severity = {s: sum(f.rule.spec.severity == s for f in audit.findings) for s in STYLE}
    yield Text(
        f"{by_severity['critical']} critical, {by_severity['warning']} warning, "
        f"{by_severity['info']} info; {len(audit.passed)} checks passed, "
        f"{len(audit.unchecked)} not checked"
        + (f", {len(audit.held)} held back until the fix they assume." if audit.held else ".")
    )


def _held(held: Held, layers: Mapping[str, str]) -> Text:
    rule = held.finding.rule
    first = ", ".join(f"{rule_id} ({layers.get(rule_id, '?')})" for rule_id in held.waits_for)
    return Text(
        f"  held back: {rule.id} ({rule.spec.title}): its fix assumes that of {first}, which "
        "comes first; run the doctor again after it.",
        style="dim",
    )


def as_data(audit: Audit, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    unread: Mapping[str, str] = snapshot.get("unread") or {}
    return {
        "target": snapshot.get("target"),
        "taken_at": snapshot.get("taken_at"),
        "findings": [
            {
                "id": f.rule.id,
                "layer": f.rule.spec.layer,
                "severity": f.rule.spec.severity,
                "title": f.rule.spec.title,
                "current": f.current,
                "recommended": f.recommended,
                "rationale": " ".join(f.rule.spec.rationale.split()),
                "evidence": f.rule.spec.evidence,
                "fix": f.fix,
                "persist": f.persist,
                "takes_effect": f.rule.spec.takes_effect,
                "caveats": f.rule.spec.caveats,
                "assumed_defaults": list(f.assumed),
            }
            for f in audit.findings
        ],
        # Findings whose fix assumes another finding's (rules' `after`): shown once that is fixed.
        "held": [
            {
                "id": h.finding.rule.id,
                "layer": h.finding.rule.spec.layer,
                "severity": h.finding.rule.spec.severity,
                "title": h.finding.rule.spec.title,
                "current": h.finding.current,
                "recommended": h.finding.recommended,
                "waits_for": list(h.waits_for),
            }
            for h in audit.held
        ],
        "passed": [rule.id for rule in audit.passed],
        "not_checked": [
            {
                "id": u.rule.id,
                "layer": u.rule.spec.layer,
                "missing": u.missing,
                "reason": _reason(u, unread),
            }
            for u in audit.unchecked
        ],
        "unread": dict(unread),
        # Settings the snapshot left out, taken as their version's defaults (pg_source
        # "default"), and the evaluated rules that rested on each.
        "assumed_defaults": [
            {
                "name": a.name,
                "value": a.value,
                "unit": a.unit,
                "shown": a.shown,
                "pg_version": a.major,
                "rules": [rule for rule, names in audit.assumed_by.items() if a.name in names],
            }
            for a in audit.assumed.values()
        ],
    }


def wait_lines(run_id: int, citations: Sequence[WaitCitation]) -> Iterator[RenderableType]:
    """What the newest benchmark of the server waited on, with the rules that speak to it."""
    if not citations:
        return
    yield Text(
        f"measured: the newest benchmark of this server with a wait profile (run {run_id}; "
        f"`pgdyno runs show {run_id} --waits`) spent its database time in",
        style="bold",
    )
    for c in citations:
        line = f"  {c.event} {100.0 * c.share:.0f}%"
        if c.why is not None:
            line += f": {c.why}"
            rules = [f"{r} (finding above)" for r in c.fired] + [f"{r} (passed)" for r in c.passed]
            line += "; rules: " + ", ".join(rules)
        yield Text(safe_text(line))


def waits_data(run_id: int, citations: Sequence[WaitCitation]) -> dict[str, Any]:
    """`doctor --json`'s "waits": the run, and its events of at least a tenth of DB time."""
    return {
        "run": run_id,
        "events": [
            {"event": c.event, "share": c.share, "why": c.why, "fired": list(c.fired),
             "passed": list(c.passed)}
            for c in citations
        ],
    }  # fmt: skip
