"""What the newest benchmark of the audited server waited on, beside the rules that speak to it.

The doctor audits settings; a wait profile (stats/waits.py) says where the server's sessions
actually spent their time under load. `cite` keeps the events of the profile that took at least
`MIN_SHARE` of the database time and names the rules of `wait_rules.toml` for each, with whether
they fired. Pure apart from `wait_rules()`, which reads the packaged file once.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from importlib import resources

from pgdyno.records.waits import WaitProfile

MIN_SHARE = 0.10  # an event below a tenth of the database time is not worth a DBA's look


@dataclass(frozen=True)
class WaitRules:
    names: tuple[str, ...]
    why: str
    rules: tuple[str, ...]


@dataclass(frozen=True)
class WaitCitation:
    event: str
    share: float
    why: str | None  # None: no rule speaks to this event
    fired: tuple[str, ...]  # rules that found something on this server
    passed: tuple[str, ...]


@cache
def wait_rules() -> tuple[WaitRules, ...]:
    text = resources.files("pgdyno.doctor").joinpath("wait_rules.toml").read_text()
    return tuple(
        WaitRules(tuple(e["names"]), str(e["why"]), tuple(e["rules"]))
        for e in tomllib.loads(text)["event"]
    )


def cite(
    found: WaitProfile,
    fired: Collection[str],
    table: tuple[WaitRules, ...] | None = None,
) -> list[WaitCitation]:
    """The profile's events of at least MIN_SHARE, largest first, each with its rules.

    >>> from pgdyno.records.waits import WaitShare
    >>> p = WaitProfile("pg_stat_activity", 10, 100, 9.0, (), (WaitShare("IO:WalSync", 0.4, 1),
    ...     WaitShare("CPU*", 0.55, 1), WaitShare("Lock:tuple", 0.05, 0)))
    >>> rules = (WaitRules(("IO:WalSync",), "WAL flushes", ("a", "b")),)
    >>> [(c.event, c.fired, c.passed) for c in cite(p, {"b"}, rules)]
    [('CPU*', (), ()), ('IO:WalSync', ('b',), ('a',))]
    """
    out = []
    for share in sorted(found.top, key=lambda w: -w.share):
        if share.share < MIN_SHARE:
            continue
        entry = next((e for e in table or wait_rules() if share.event in e.names), None)
        rules = entry.rules if entry else ()
        out.append(
            WaitCitation(
                share.event,
                share.share,
                entry.why if entry else None,
                tuple(r for r in rules if r in fired),
                tuple(r for r in rules if r not in fired),
            )
        )
    return out
