"""The `server` section of a doctor snapshot: what a PostgreSQL server says about itself.

Each field comes from one query (`queries/doctor_*.sql`, one file per version range where the
views differ), run on its own: a query the role may not run leaves its field null with one
sentence in `unread`, and the others are still read. The connection is in autocommit mode, so a
failed query leaves no aborted transaction behind. A role with LOGIN only (14 to 18) sees:

* pg_settings without the superuser-only settings (data_directory, ...) and with sourcefile and
  sourceline null (superuser or pg_read_all_settings shows them);
* the size of every database it may CONNECT to (PUBLIC may, unless revoked);
* the sessions of other roles in pg_stat_activity without their type and state, so client
  connections cannot be counted (superuser or pg_read_all_stats shows them);
* pg_stat_bgwriter, pg_stat_checkpointer and pg_stat_database in full.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from psycopg import conninfo as pg_conninfo

from pgdyno.errors import InsufficientPrivilege, QueryRefused
from pgdyno.postgres.client import Client, ServerInfo
from pgdyno.postgres.queries import load

__all__ = ["cluster_data_bytes", "connects_here", "is_local", "queries_for", "read_server"]

Rows = list[tuple[Any, ...]]
Unread = dict[str, str]

_SETTING_COLUMNS = ("setting", "unit", "vartype", "source", "sourcefile", "sourceline",
                    "pending_restart", "context", "boot_val", "min_val", "max_val",
                    "enumvals")  # fmt: skip
_CACHE_COLUMNS = ("blks_hit", "blks_read", "temp_files", "temp_bytes", "deadlocks")
# pgdyno's dataset templates (pgbench/dataset.py `template_name`), as queries/*.sql match them.
_TEMPLATE_RE = re.compile(r"pgdyno_tpl_(s|tpcc_w)[0-9]+")
_READ_ALL_SETTINGS = "superusers and members of pg_read_all_settings (or pg_monitor)"


def queries_for(version_num: int) -> dict[str, str]:
    """Field of the `server` section -> the query file that reads it on this server version.

    >>> queries_for(160004)["checkpoints"], queries_for(170000)["checkpoints"]
    ('doctor_checkpoints_pre170000', 'doctor_checkpoints_post170000')
    """
    checkpoints = "post170000" if version_num >= 170000 else "pre170000"
    return {
        "settings": "doctor_settings",
        "databases": "doctor_databases",
        "connections": "doctor_connections",
        "checkpoints": f"doctor_checkpoints_{checkpoints}",
        "cache": "doctor_cache",
    }


def read_server(client: Client, dsn: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The `server` section of a doctor snapshot, and `unread`: dotted field name
    ("server.databases") -> one sentence why it could not be read.

    `dsn` is the connection string `client` was opened with; the host the connection really
    went to (PGHOST, libpq's default socket) is put in it before asking `is_local`.
    """
    unread: Unread = {}
    server: dict[str, Any] = dict.fromkeys(("version_num", "version", "is_superuser", "local"))
    info: ServerInfo | None = None
    try:
        info = client.server_info()
    except QueryRefused as exc:
        why = _failure(exc)
        for name in ("version_num", "version", "is_superuser"):
            unread[f"server.{name}"] = f"the server's version and role could not be read: {why}."
    if info is not None:
        server.update(
            version_num=info.version_num, version=info.version, is_superuser=info.is_superuser
        )
    version_num = info.version_num if info else client.server_version_num
    for field, query in queries_for(version_num).items():
        try:
            rows = client.rows(load(query))
        except QueryRefused as exc:  # a lost connection (ConnectionLost) ends the audit
            server[field] = None
            unread[f"server.{field}"] = f"{_SOURCES[field]} could not be read: {_failure(exc)}."
            continue
        server[field] = _SHAPES[field](rows, unread)
    server["data_bytes"] = cluster_data_bytes(server["databases"])
    data_directory = ((server["settings"] or {}).get("data_directory") or {}).get("setting")
    here = pg_conninfo.make_conninfo(dsn, host=client.host)
    server["local"] = is_local(here, data_directory)
    return server, unread


def cluster_data_bytes(databases: list[dict[str, Any]] | None) -> int | None:
    """The cluster's data: every database whose size was read, pgdyno's dataset templates left
    out (copied from, never read by a workload); None when the sizes could not be read.

    >>> cluster_data_bytes([{"name": "app", "bytes": 5}, {"name": "pgdyno_tpl_s10", "bytes": 9},
    ...                     {"name": "pgdyno_bench", "bytes": 3}])
    8
    """
    if databases is None:
        return None
    return sum(int(db["bytes"]) for db in databases if not _TEMPLATE_RE.fullmatch(db["name"]))


def is_local(dsn: str, data_directory: str | None) -> bool:
    """True when the server runs on this machine: the connection goes to a Unix socket or a
    loopback address (`connects_here`), and `data_directory` is known and exists here.
    """
    if not data_directory or not connects_here(dsn):
        return False
    try:
        return Path(data_directory).is_dir()
    except OSError:  # a parent directory this user may not search
        return False


def connects_here(dsn: str) -> bool:
    """Whether a connection string leads to this machine: a Unix socket (no host, a directory,
    or an abstract socket `@name`) or localhost / a loopback address, for every host listed.

    >>> connects_here(""), connects_here("host=/var/run/postgresql port=5433")
    (True, True)
    >>> connects_here("host=localhost"), connects_here("postgresql://[::1]:5433/x")
    (True, True)
    >>> connects_here("host=db.example.com"), connects_here("host=localhost hostaddr=10.0.0.5")
    (False, False)
    >>> connects_here("host=127.0.0.1,db.example.com")
    False
    """
    params = pg_conninfo.conninfo_to_dict(dsn)
    targets = str(params.get("hostaddr") or params.get("host") or "").split(",")
    return all(_is_here(target.strip()) for target in targets)


def _is_here(host: str) -> bool:
    if not host or host.startswith(("/", "@")) or host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _failure(exc: QueryRefused) -> str:
    """Why a query failed, as a clause."""
    if isinstance(exc, InsufficientPrivilege):
        return f"{exc.reason} (a superuser can read it)"
    return exc.reason


# -- rows -> JSON-ready values ----------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A value as a JSON type: timestamps as ISO strings, numerics as int."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value)
    return value


def _settings(rows: Rows, unread: Unread) -> dict[str, dict[str, Any]]:
    settings = {name: dict(zip(_SETTING_COLUMNS, values, strict=True)) for name, *values in rows}
    if any(
        row["source"] == "configuration file" and row["sourcefile"] is None
        for row in settings.values()
    ):
        unread["server.settings.sourcefile"] = (
            f"pg_settings shows sourcefile and sourceline only to {_READ_ALL_SETTINGS}."
        )
    if "data_directory" not in settings:
        unread["server.settings.data_directory"] = (
            f"pg_settings shows data_directory and the other superuser-only settings only to "
            f"{_READ_ALL_SETTINGS}, so the server cannot be placed on this machine."
        )
    return settings


def _databases(rows: Rows, unread: Unread) -> list[dict[str, Any]]:
    skipped = [name for name, size in rows if size is None]
    if skipped:
        unread["server.databases"] = (
            f"the size of {', '.join(skipped)} needs CONNECT on the database or "
            "pg_read_all_stats (or pg_monitor), so it is left out."
        )
    return [{"name": name, "bytes": int(size)} for name, size in rows if size is not None]


def _connections(rows: Rows, unread: Unread) -> dict[str, int] | None:
    total, active, idle_in_transaction, hidden = rows[0]
    if hidden:
        unread["server.connections"] = (
            f"pg_stat_activity hides the type and state of other roles' sessions ({hidden} now) "
            "from this one: counting them takes a superuser or pg_read_all_stats (or pg_monitor)."
        )
        return None
    return {"total": total, "active": active, "idle_in_transaction": idle_in_transaction}


def _checkpoints(rows: Rows, _unread: Unread) -> dict[str, Any]:
    return {
        key: _plain(value)
        for key, value in zip(("timed", "requested", "stats_reset"), rows[0], strict=True)
    }


def _cache(rows: Rows, _unread: Unread) -> dict[str, int]:
    return {key: _plain(value) for key, value in zip(_CACHE_COLUMNS, rows[0], strict=True)}


_SHAPES: dict[str, Callable[[Rows, Unread], Any]] = {
    "settings": _settings,
    "databases": _databases,
    "connections": _connections,
    "checkpoints": _checkpoints,
    "cache": _cache,
}
_SOURCES = {
    "settings": "pg_settings",
    "databases": "the database sizes",
    "connections": "pg_stat_activity",
    "checkpoints": "the checkpoint counters",
    "cache": "pg_stat_database",
}
