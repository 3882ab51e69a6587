"""The plan files tests write: one helper for the smallest real comparison, instead of a copy
of its TOML in every test that needs one."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.settings_catalog import recorded_settings

# The smallest matrix that runs for real: select-only at scale 1, one client, one 2 s round,
# no warm-up.
TINY_MATRIX: Mapping[str, object] = {
    "workloads": ["select-only"], "scales": [1], "clients": [1], "duration": 2, "repeats": 1,
    "warmup": 0,
}  # fmt: skip
# Two sets: the defaults, and work_mem 8MB (a real change that select-only does not feel).
AB: Sequence[tuple[str, Mapping[str, object]]] = (("a", {}), ("b", {"work_mem": "8MB"}))


def _value(value: object) -> str:
    """A TOML value: strings, numbers, booleans and lists of them are written as JSON writes
    them, which TOML reads the same."""
    return json.dumps(value)


def tiny_plan(
    name: str,
    sets: Sequence[tuple[str, Mapping[str, object]]] = AB,
    head: Mapping[str, object] | None = None,
    **matrix: object,
) -> str:
    """A plan's text: `TINY_MATRIX` with `matrix` laid over it (a key given None is left
    out), `sets` as (name, PostgreSQL settings) and `head`'s keys (a baseline, a mode) after
    the name.

    >>> print(tiny_plan("x", repeats=2, warmup=None, sets=[("a", {})]))
    name = "x"
    [matrix]
    workloads = ["select-only"]
    scales = [1]
    clients = [1]
    duration = 2
    repeats = 2
    [[set]]
    name = "a"
    <BLANKLINE>
    """
    lines = [f"name = {_value(name)}"]
    lines += [f"{key} = {_value(value)}" for key, value in (head or {}).items()]
    lines.append("[matrix]")
    settings = {**TINY_MATRIX, **matrix}
    lines += [f"{key} = {_value(value)}" for key, value in settings.items() if value is not None]
    for set_name, pg in sets:
        lines += ["[[set]]", f"name = {_value(set_name)}"]
        if pg:
            lines.append("[set.pg]")
            lines += [f"{key} = {_value(value)}" for key, value in pg.items()]
    return "\n".join(lines) + "\n"


def bare_plan(
    name: str = "p", sets: Sequence[tuple[str, Mapping[str, object]]] = (("a", {}), ("b", {})),
    **matrix: object,
) -> str:  # fmt: skip
    """A plan's text with only the tiny plan's cell (select-only, scale 1, one client) and
    `matrix`: no duration, repeats or warm-up unless given; two sets without settings.

    >>> print(bare_plan(period=4, sets=[("a", {})]))
    name = "p"
    [matrix]
    workloads = ["select-only"]
    scales = [1]
    clients = [1]
    period = 4
    [[set]]
    name = "a"
    <BLANKLINE>
    """
    return tiny_plan(name, sets, **{"duration": None, "repeats": None, "warmup": None, **matrix})


# Binaries that are never run (a plan check asks only their version) and PostgreSQL 18's
# recorded settings: what the unit tests of the sets' designs check plans against.
PG18 = Binaries(Path("/nonexistent/18/bin"), "18.1", "test")
PG17 = Binaries(Path("/nonexistent/17/bin"), "17.6", "test")
META = recorded_settings(18)
