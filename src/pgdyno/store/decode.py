"""Rows of the results database into frozen records: the one place rows become types.

Every backend reads the same columns, so a second backend (PostgreSQL) decodes its rows here
too. JSON columns are parsed here; damaged text is named instead of failing obscurely.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pgdyno.errors import StoreUnavailable
from pgdyno.records import Event, SecondRow, StatementLatency
from pgdyno.records.stored import (
    ComparisonSet,
    JsonObject,
    RunListing,
    RunOutcome,
    StoredComparison,
    StoredRun,
)

Row = Mapping[str, Any]

# The runs table's own columns, in table order: the head of StoredRun's fields.
_SESSION_FIELDS = ("host", "server", "target", "session_status")
_CHILD_FIELDS = ("seconds", "statements", "samples", "events")
RUN_ROW_COLUMNS = tuple(
    f.name for f in fields(StoredRun) if f.name not in _SESSION_FIELDS + _CHILD_FIELDS
)
RUN_ROW_SQL = ", ".join(RUN_ROW_COLUMNS)
# The runs columns a comparison's analysis needs.
OUTCOME_SQL = ", ".join(f.name for f in fields(RunOutcome))
_OBJECT_COLUMNS = ("settings", "summary", "health", "devices", "interference")


def loads(text: str, where: str) -> Any:
    """A JSON column read back; damaged text is named instead of failing obscurely."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreUnavailable(
            f"{where} in the results database holds damaged JSON ({exc}): the file was "
            "changed outside pgdyno; restore it from a copy or pass another --results file."
        ) from exc


def _object(text: str | None, where: str) -> JsonObject | None:
    """A JSON column that holds an object (or NULL); any other shape is damage too."""
    if text is None:
        return None
    value = loads(text, where)
    if not isinstance(value, dict):
        raise StoreUnavailable(
            f"{where} in the results database holds {type(value).__name__} where an object "
            "belongs: the file was changed outside pgdyno; restore it from a copy or pass "
            "another --results file."
        )
    return value


def _list(text: str, where: str) -> tuple[Any, ...]:
    value = loads(text, where)
    if not isinstance(value, list):
        raise StoreUnavailable(
            f"{where} in the results database holds {type(value).__name__} where a list "
            "belongs: the file was changed outside pgdyno; restore it from a copy or pass "
            "another --results file."
        )
    return tuple(value)


def stored_run(
    run: Row,
    session: Row,
    seconds: list[dict[str, Any]],
    statements: list[dict[str, Any]],
    events: list[dict[str, Any]],
    samples: Mapping[str, Mapping[int, float]],
) -> StoredRun:
    run_id = run["id"]
    decoded = {c: _object(run[c], f"run {run_id}'s {c}") for c in _OBJECT_COLUMNS}
    argv = _list(run["pgbench_argv"], f"run {run_id}'s pgbench_argv")
    where = f"session {session['id']}"
    return StoredRun(
        **{**run, **decoded, "pgbench_argv": argv},
        host=_object(session["host"], f"{where}'s host") or {},
        server=_object(session["server"], f"{where}'s server") or {},
        target=session["target"],
        session_status=session["status"],
        seconds=tuple(SecondRow(**s) for s in seconds),
        statements=tuple(StatementLatency(**s) for s in statements),
        samples=samples,
        events=tuple(
            Event(e["t"], e["kind"], dict(_object(e["detail"], f"an event of run {run_id}") or {}))
            for e in events
        ),
    )


def _interference(row: Row) -> JsonObject | None:
    return _object(row["interference"], f"run {row['id']}'s interference")


def run_listing(row: Row) -> RunListing:
    return RunListing(**{**row, "interference": _interference(row)})


def run_outcome(row: Row) -> RunOutcome:
    health = _object(row["health"], f"run {row['id']}'s health") if row["health"] else None
    return RunOutcome(**{**row, "health": health or {}, "interference": _interference(row)})


def comparison(row: Row, sets: list[dict[str, Any]]) -> StoredComparison:
    where = f"comparison {row['id']}"
    return StoredComparison(
        **{
            **row,
            "scales": _list(row["scales"], f"{where}'s scales"),
            "rounds": _object(row.get("rounds"), f"{where}'s rounds"),
        },
        sets=tuple(
            ComparisonSet(
                s["name"],
                _object(s["requested"], f"{where}'s set {s['name']}") or {},
                _object(s["effective"] or None, f"{where}'s set {s['name']}"),
            )
            for s in sets
        ),
    )
