"""A results file checked whole before any of it is copied into a store (`runs import`).

An export edited or damaged outside pgdyno could be merged and then break `runs list` or
`report` for every user of a shared store. So, before anything is added: every table pgdyno
reads has exactly the columns this pgdyno's migrations give it, every value has the type its
column declares (SQLite keeps whatever it is given), and every JSON column holds strict JSON
of the shape results/decode.py reads. The first fault is named (table, column, row) in one
sentence and nothing is imported.
"""

from __future__ import annotations

import sqlite3
from functools import cache
from pathlib import Path

from pgdyno.errors import StoreUnavailable
from pgdyno.results.database import Database
from pgdyno.results.migrate import SCHEMA_TABLE, migrations
from pgdyno.textsafe import strict_loads

# The JSON columns and the shape results/decode.py reads from each (a SQL NULL is always allowed
# where the column allows it; the schema says where).
JSON_SHAPES: dict[str, dict[str, type]] = {
    "sessions": {"command": list, "host": dict, "server": dict},
    "runs": {"pgbench_argv": list, "settings": dict, "summary": dict, "health": dict,
             "devices": dict, "interference": dict, "tpcc": dict, "waits": dict,
             "profile": dict},
    "run_events": {"detail": dict},
    "comparisons": {"scales": list, "rounds": dict},
    "comparison_sets": {"requested": dict, "effective": dict},
}  # fmt: skip
EMPTY_READS_AS_NULL = {("comparison_sets", "effective")}  # decode.comparison: `or None`

# The storage classes (SQLite's typeof) each declared type accepts.
_TYPES = {"INTEGER": ("integer", "null"), "REAL": ("real", "integer", "null"),
          "TEXT": ("text", "null")}  # fmt: skip
# How a row is named in the message: by its id, or by the row it belongs to.
_ROW_KEY = {"schema_migrations": "version", "comparison_sets": "comparison_id",
            "run_seconds": "run_id", "run_statements": "run_id", "run_samples": "run_id",
            "run_events": "run_id"}  # fmt: skip


@cache
def expected_columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """table -> ((column, declared type), ...) as this pgdyno's migrations make them."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(SCHEMA_TABLE)
        for _version, _name, script in migrations():
            conn.executescript(script)
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]  # fmt: skip
        return {t: _columns_of(conn, t) for t in tables}
    finally:
        conn.close()


def _columns_of(conn: sqlite3.Connection, table: str) -> tuple[tuple[str, str], ...]:
    return tuple((r[1], r[2].upper()) for r in conn.execute(f"PRAGMA table_info({table})"))


def check_whole_file(source: Database, path: Path) -> None:
    """StoreUnavailable naming the first fault of the (migrated) SQLite `source`, read from
    the file at `path`; nothing when every table, value and JSON column is as pgdyno wrote it."""
    for table, want in expected_columns().items():
        rows = source.query(f"SELECT name, type FROM pragma_table_info('{table}')")
        have = tuple((str(r["name"]), str(r["type"]).upper()) for r in rows)
        if have != want:
            raise _damaged(path, f"its table {table} {_difference(have, want)}")
        for column, declared in want:
            _check_types(source, path, table, column, declared)
        for column, shape in JSON_SHAPES.get(table, {}).items():
            _check_json(source, path, table, column, shape)


def _difference(have: tuple[tuple[str, str], ...], want: tuple[tuple[str, str], ...]) -> str:
    """
    >>> _difference((("id", "INTEGER"),), (("id", "INTEGER"), ("uid", "TEXT")))
    'has no column uid'
    >>> _difference((), (("id", "INTEGER"),))
    'is missing'
    >>> _difference((("id", "TEXT"),), (("id", "INTEGER"),))
    'has column id as TEXT, not INTEGER'
    """
    if not have:
        return "is missing"
    names = dict(have)
    for name, declared in want:
        if name not in names:
            return f"has no column {name}"
        if names[name] != declared:
            return f"has column {name} as {names[name]}, not {declared}"
    extra = next(name for name, _ in have if name not in dict(want))
    return f"has a column {extra} pgdyno does not write"


def _row_name(table: str, row: dict[str, object]) -> str:
    key = _ROW_KEY.get(table, "id")
    return f"the row of {key} {row['k']}"


def _check_types(source: Database, path: Path, table: str, column: str, declared: str) -> None:
    allowed = _TYPES.get(declared)
    if allowed is None:
        return
    marks = ", ".join(f"'{t}'" for t in allowed)
    key = _ROW_KEY.get(table, "id")
    found = source.query(
        f"SELECT {key} AS k, typeof({column}) AS t FROM {table}"  # names: this module's own
        f" WHERE typeof({column}) NOT IN ({marks}) LIMIT 1"
    )
    if found:
        raise _damaged(path, f"{table}.{column} of {_row_name(table, found[0])} holds "
                             f"{found[0]['t']} where {declared} belongs")  # fmt: skip


def _check_json(source: Database, path: Path, table: str, column: str, shape: type) -> None:
    key = _ROW_KEY.get(table, "id")
    rows = source.query(f"SELECT {key} AS k, {column} AS v FROM {table} WHERE {column} IS NOT NULL")
    for row in rows:
        text = row["v"]
        if text == "" and (table, column) in EMPTY_READS_AS_NULL:
            continue
        try:
            value = strict_loads(text)
        except ValueError as exc:
            reason = f"damaged JSON ({exc})"
        else:
            if isinstance(value, shape):
                continue
            want = "an object" if shape is dict else "a list"
            reason = f"JSON {type(value).__name__} where {want} belongs"
        raise _damaged(path, f"{table}.{column} of {_row_name(table, row)} holds {reason}")


def _damaged(path: Path, what: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"{path} cannot be imported: {what}; nothing was imported: export the runs again "
        "from the store that holds them."
    )
