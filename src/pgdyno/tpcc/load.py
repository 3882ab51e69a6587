"""The TPC-C-like dataset: schema, rows generated server-side in parallel sessions, keys,
VACUUM ANALYZE and the five transaction functions, in an empty database.

Every row is made by the server (INSERT ... SELECT over generate_series, sql/load_*.sql): the
100,000 items once, then each warehouse's rows of each table as one task; `sessions`
connections take tasks in turn. Keys and indexes come after the rows (faster than maintaining
them row by row), built in parallel too, then VACUUM ANALYZE of each table.
"""

from __future__ import annotations

import random
import string
import time
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pgdyno.errors import ConnectionFailed, DatasetError, PgdynoError, QueryRefused
from pgdyno.postgres.client import connect, describe
from pgdyno.postgres.tpcc_queries import table_sizes
from pgdyno.tpcc.nurand import C_LAST_LOAD
from pgdyno.tpcc.sessions import Step, Task, run_tasks
from pgdyno.tpcc.sql import load as sql_text
from pgdyno.tpcc.sql import statements

MIB = 1024**2
_POOL_CHARS = 4000  # windows of it (offset, length) vary enough: 4,000 x 25 for i_data


@dataclass(frozen=True)
class Loaded:
    warehouses: int
    seconds: float  # wall time of the whole load
    table_bytes: int  # heap size of the nine tables (pg_table_size sum), for MB/s figures
    total_bytes: int  # database size after indexes, as pg_database_size


def load(dsn: str, password: str | None, warehouses: int, *, sessions: int) -> Loaded:
    """Create the schema and generate every row server-side in the EMPTY database `dsn` names,
    with `sessions` parallel connections over warehouses; then keys and indexes, VACUUM ANALYZE
    and the five functions. Raises DatasetError (one sentence: what failed, what to do) on any
    failure, with every thread ended and every connection closed. The caller creates the empty
    database, marks it complete afterwards and drops it when this raises or is killed."""
    if warehouses < 1 or sessions < 1:
        raise DatasetError(
            f"cannot load {warehouses} warehouse(s) with {sessions} session(s): both must be at "
            "least 1."
        )
    started = time.monotonic()
    step = "creating the schema"
    try:
        with connect(dsn, password) as client:
            client.run(sql_text("schema"))
            client.run(sql_text("load_helpers"))
        step = "generating the rows"
        run_tasks(dsn, password, _row_tasks(warehouses), sessions)
        step = "building the keys and indexes"
        run_tasks(dsn, password, _each_statement("keys"), sessions)
        step = "vacuuming and analyzing the tables"
        run_tasks(dsn, password, _each_statement("vacuum"), sessions)
        step = "creating the transaction functions"
        with connect(dsn, password) as client:
            client.run(sql_text("load_cleanup"))
            client.run(sql_text("functions"))
            sizes = table_sizes(client)
    except PgdynoError as exc:
        raise DatasetError(
            f"loading {warehouses} TPC-C-like warehouse(s) into {describe(dsn)} failed while "
            f"{step} ({_reason(exc)}); check the server's log and free disk space, then run "
            "again."
        ) from exc
    return Loaded(warehouses, time.monotonic() - started, sizes.table_bytes, sizes.total_bytes)


def _row_tasks(warehouses: int) -> list[Task]:
    """One task per table and warehouse (a table's rows of one warehouse), the longest of each
    warehouse first so that the sessions end together; the item table once."""
    pool = _pool()
    tasks: list[Task] = [(Step(sql_text("load_item"), {"pool": pool}),)]
    for w in range(1, warehouses + 1):
        params: dict[str, Any] = {"w_lo": w, "w_hi": w, "pool": pool, "c_last": C_LAST_LOAD}
        tasks += [
            (Step(sql_text(f"load_{table}"), params),)
            for table in ("orders", "stock", "customers", "history", "warehouses")
        ]
    return tasks


def _each_statement(name: str) -> list[Task]:
    return [(Step(statement),) for statement in statements(name)]


@cache
def _pool() -> bytes:
    """The characters random a-strings are cut from: lowercase letters and digits, fixed."""
    chars = random.Random(43322).choices(string.ascii_lowercase + string.digits, k=_POOL_CHARS)
    return "".join(chars).encode()


def _reason(exc: PgdynoError) -> str:
    if isinstance(exc, QueryRefused) and exc.reason:
        return exc.reason
    if isinstance(exc, ConnectionFailed):
        return "the connection failed or broke"
    return str(exc).rstrip(".")


_SIZES: dict[str, Any] = tomllib.loads(
    resources.files("pgdyno.tpcc").joinpath("sizes.toml").read_text()
)


def dataset_bytes(warehouses: int) -> int:
    """The database's estimated size after `load` of `warehouses` warehouses, from the sizes
    measured on PostgreSQL 18 (sizes.toml).

    >>> dataset_bytes(10) > 10 * dataset_bytes(1) // 2
    True
    """
    fixed = float(_SIZES["fixed_mib"])
    per_warehouse = float(_SIZES["per_warehouse_mib"])
    return round((fixed + per_warehouse * warehouses) * MIB)
