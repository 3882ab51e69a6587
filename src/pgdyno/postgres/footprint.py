"""What pgdyno leaves on a PostgreSQL server, and how it is listed and removed.

pgdyno creates databases on the server it benchmarks: one template per dataset scale
(`pgdyno_tpl_s<scale>`, marked complete by a comment) and the bench copy (`pgdyno_bench`); with
`--prewarm` the pg_prewarm extension inside the bench copy (marked by a comment when pgdyno
created it). On an existing server a user must be able to see them, their size, and remove them
— only them: a database is pgdyno's by its name, the names pgdyno itself drops unconditionally
before re-creating them. The settings in postgresql.auto.conf (ALTER SYSTEM) are listed too.

Collect (`read_footprint`, `auto_conf_settings`) -> compute (`bench_leftovers`, `choose_drops`)
-> render (`leftovers_line`, `footprint_lines`, `*_json`); `drop_databases` is the one writer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pgdyno.errors import (
    ConnectionFailed,
    DatasetError,
    InsufficientPrivilege,
    QueryRefused,
    UsageError,
)
from pgdyno.postgres.client import Client, compose, connect, identifier, with_dbname
from pgdyno.postgres.queries import load

# The names and comments that make an object pgdyno's. They are defined here, below pgbench/
# (whose dataset.py creates the objects), so that listing them needs nothing above postgres/.
BENCH_DB = "pgdyno_bench"
MARKER_PREFIX = "pgdyno dataset v1"  # a template's comment starts so once it is complete
# The bench database's comment says whether it is still an untouched copy of a template, so
# read-only runs (also in later sessions) can reuse it, warm, instead of copying again.
PRISTINE = "pgdyno bench: pristine copy of {template}"
# The comment on an extension pgdyno created (pg_prewarm), so `pgdyno datasets list` can tell
# it from one that was there before.
EXTENSION_NOTE = "pgdyno: created for --prewarm"
# Templates: pgdyno_tpl_s<scale> (pgbench -i) and pgdyno_tpl_tpcc_w<warehouses> (TPC-C-like).
TEMPLATE_RE = re.compile(r"pgdyno_tpl_(s|tpcc_w)(\d+)")
_PRISTINE_RE = re.compile(
    re.escape(PRISTINE).replace(r"\{template\}", r"pgdyno_tpl_(s|tpcc_w)(\d+)")
)
_KIND = {"s": "pgbench", "tpcc_w": "tpcc"}
OBJECT_IN_USE = "55006"


@dataclass(frozen=True)
class PgdynoDatabase:
    name: str
    template: bool  # a dataset template; else the bench copy
    scale: int | None  # None: the bench copy was changed by a writing run (or is unmarked)
    # pgbench (scale) or tpcc (scale = warehouses); None where the scale is None
    bytes: int | None  # None: the role may not measure it (no CONNECT, no pg_read_all_stats)
    complete: bool  # a template's ready marker is there (False: an interrupted generation)
    dataset: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "kind": "database", "name": self.name, "template": self.template,
            "scale": self.scale, "bytes": self.bytes, "complete": self.complete,
            "dataset": self.dataset,
        }  # fmt: skip


@dataclass(frozen=True)
class PgdynoExtension:
    name: str
    database: str  # extensions live in one database: pgdyno creates them in the bench copy
    version: str

    def as_json(self) -> dict[str, object]:
        return {"kind": "extension", "name": self.name, "database": self.database,
                "version": self.version}  # fmt: skip


@dataclass(frozen=True)
class AutoConfSetting:
    """One line of postgresql.auto.conf, as pg_file_settings reads it."""

    name: str
    setting: str | None
    applied: bool
    error: str | None
    # Who set it. None: unknown. The PostgreSQL settings journal of `tune --apply` is what can
    # mark a line True (a value pgdyno wrote, with the one it replaced).
    set_by_pgdyno: bool | None = None

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "setting": self.setting, "applied": self.applied,
                "error": self.error, "set_by_pgdyno": self.set_by_pgdyno}  # fmt: skip


@dataclass(frozen=True)
class Footprint:
    """pgdyno's objects on one server, and postgresql.auto.conf."""

    databases: tuple[PgdynoDatabase, ...]
    extensions: tuple[PgdynoExtension, ...]
    auto_conf: tuple[AutoConfSetting, ...] | None  # None: this role may not read it
    notes: tuple[str, ...] = ()  # what could not be read, one sentence each


PgdynoObject = PgdynoDatabase | PgdynoExtension


# -- collect ------------------------------------------------------------------------------------


def is_pgdyno_name(name: str) -> bool:
    """
    >>> is_pgdyno_name("pgdyno_tpl_s5"), is_pgdyno_name("pgdyno_bench")
    (True, True)
    >>> is_pgdyno_name("pgdyno_tpl_tpcc_w2"), is_pgdyno_name("pgdyno_tpl_tpcc_s2")
    (True, False)
    >>> is_pgdyno_name("pgdyno_tpl_s5x"), is_pgdyno_name("postgres")
    (False, False)
    """
    return name == BENCH_DB or TEMPLATE_RE.fullmatch(name) is not None


def database_of(name: str, note: str | None, size: int | None) -> PgdynoDatabase:
    """A row of pgdyno_databases.sql as a record: scale from the name or the bench copy's note.

    >>> database_of("pgdyno_tpl_s5", "pgdyno dataset v1 scale=5 init=dtgvp ready", 9)
    PgdynoDatabase(name='pgdyno_tpl_s5', template=True, scale=5, bytes=9, complete=True, \
dataset='pgbench')
    >>> database_of("pgdyno_tpl_s7", None, None).complete
    False
    >>> copy = database_of("pgdyno_bench", "pgdyno bench: pristine copy of pgdyno_tpl_tpcc_w5", 9)
    >>> copy.scale, copy.dataset
    (5, 'tpcc')
    """
    template = TEMPLATE_RE.fullmatch(name)
    if template is not None:
        complete = bool(note) and str(note).startswith(MARKER_PREFIX)
        kind, scale = _KIND[template.group(1)], int(template.group(2))
        return PgdynoDatabase(name, True, scale, size, complete, kind)
    copy_of = _PRISTINE_RE.fullmatch(note or "")
    if copy_of is None:
        return PgdynoDatabase(name, False, None, size, True)
    return PgdynoDatabase(name, False, int(copy_of.group(2)), size, True, _KIND[copy_of.group(1)])


def template_name(scale: int, dataset: str = "pgbench") -> str:
    """The template database of a dataset: pgbench's at a scale, or TPC-C-like's at a number
    of warehouses.

    >>> template_name(10), template_name(2, "tpcc")
    ('pgdyno_tpl_s10', 'pgdyno_tpl_tpcc_w2')
    """
    return f"pgdyno_tpl_s{scale}" if dataset == "pgbench" else f"pgdyno_tpl_tpcc_w{scale}"


@dataclass(frozen=True)
class _Database:
    """A row of queries/pgdyno_databases.sql."""

    datname: str
    note: str | None
    bytes: int | None  # None: the role may not read its size


@dataclass(frozen=True)
class _Extension:
    """A row of queries/pgdyno_extensions.sql."""

    extname: str
    extversion: str


def pgdyno_databases(client: Client) -> list[PgdynoDatabase]:
    """pgdyno's databases on the server, templates by scale, then the bench copy."""
    found = [
        database_of(row.datname, row.note, row.bytes)
        for row in client.records(load("pgdyno_databases"), _Database, {"bench": BENCH_DB})
    ]
    return sorted(found, key=lambda d: (not d.template, d.scale or 0, d.name))


def pgdyno_extensions(dsn: str, password: str | None) -> list[PgdynoExtension]:
    """Extensions pgdyno created. It creates them only in the bench copy, so only that database
    is read (connecting to a template would block a concurrent bench's copy of it)."""
    with connect(with_dbname(dsn, BENCH_DB), password) as client:
        rows = client.records(load("pgdyno_extensions"), _Extension, {"mark": EXTENSION_NOTE})
    return [PgdynoExtension(row.extname, BENCH_DB, row.extversion) for row in rows]


def auto_conf_settings(client: Client) -> list[AutoConfSetting]:
    """The settings in postgresql.auto.conf (what ALTER SYSTEM wrote), in file order.

    Raises InsufficientPrivilege when the role may not read pg_file_settings (it needs
    superuser, or EXECUTE on pg_show_all_file_settings(): pg_read_all_settings is not enough).
    `set_by_pgdyno` is left None here.
    """
    return client.records(load("auto_conf_settings"), AutoConfSetting)


def server_objects(dsn: str, password: str | None) -> list[PgdynoObject]:
    """pgdyno's databases and extensions on the server (what `bench_leftovers` compares)."""
    with connect(dsn, password) as client:
        databases: list[PgdynoObject] = [*pgdyno_databases(client)]
    if any(d.name == BENCH_DB for d in databases):
        return [*databases, *pgdyno_extensions(dsn, password)]
    return databases


def read_footprint(dsn: str, password: str | None) -> Footprint:
    """Collect pgdyno's objects and postgresql.auto.conf from the server `dsn` names.

    What the role may not read is left out with a note; only an unreachable server fails.
    """
    notes: list[str] = []
    with connect(dsn, password) as client:
        databases = pgdyno_databases(client)
        try:
            auto_conf: tuple[AutoConfSetting, ...] | None = tuple(auto_conf_settings(client))
        except InsufficientPrivilege:
            auto_conf = None
            notes.append(
                "postgresql.auto.conf not read: pg_file_settings needs a superuser (or EXECUTE "
                "on pg_show_all_file_settings)"
            )
    extensions: list[PgdynoExtension] = []
    if any(d.name == BENCH_DB for d in databases):
        try:
            extensions = pgdyno_extensions(dsn, password)
        except (QueryRefused, ConnectionFailed) as exc:  # no CONNECT on it, or dropped just now
            notes.append(f"extensions in {BENCH_DB} not read: {_reason(exc)}")
    return Footprint(tuple(databases), tuple(extensions), auto_conf, tuple(notes))


# -- compute ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    """One object a bench left on the server, created by it or there before (reused)."""

    kind: str  # database | extension
    name: str
    bytes: int | None
    created: bool
    database: str | None = None  # an extension's database

    def as_json(self) -> dict[str, object]:
        data: dict[str, object] = {"kind": self.kind, "name": self.name, "bytes": self.bytes}
        if self.database is not None:
            data["database"] = self.database
        return data


def bench_leftovers(
    before: Sequence[PgdynoObject],
    after: Sequence[PgdynoObject],
    used: Iterable[str],
) -> list[Leftover]:
    """What a bench leaves: every pgdyno object that is there now and was not before (created),
    and the ones it used (database names in `used`, extensions in them) that were (reused).

    >>> t = PgdynoDatabase("pgdyno_tpl_s1", True, 1, 10, True)
    >>> b = PgdynoDatabase("pgdyno_bench", False, 1, 20, True)
    >>> old = PgdynoDatabase("pgdyno_tpl_s9", True, 9, 90, True)
    >>> [(x.name, x.created) for x in bench_leftovers([t, old], [t, old, b], ["pgdyno_tpl_s1"])]
    [('pgdyno_tpl_s1', False), ('pgdyno_bench', True)]
    """
    seen = {_key(item) for item in before}
    used_names = set(used)
    left: list[Leftover] = []
    for item in after:
        created = _key(item) not in seen
        where = item.database if isinstance(item, PgdynoExtension) else item.name
        if created or where in used_names:
            left.append(_leftover(item, created))
    return left


def _key(item: PgdynoObject) -> tuple[str, str, str]:
    if isinstance(item, PgdynoExtension):
        return ("extension", item.database, item.name)
    return ("database", "", item.name)


def _leftover(item: PgdynoObject, created: bool) -> Leftover:
    if isinstance(item, PgdynoExtension):
        return Leftover("extension", item.name, None, created, item.database)
    return Leftover("database", item.name, item.bytes, created)


def _reason(exc: Exception) -> str:
    return exc.reason if isinstance(exc, QueryRefused) else str(exc)


def check_drop_request(names: Sequence[str], every: bool) -> None:
    """Names or --all, and only pgdyno's names: checked before any server is reached."""
    if every == bool(names):
        raise UsageError("name the databases to drop or give --all (not both).")
    foreign = [name for name in names if not is_pgdyno_name(name)]
    if foreign:
        raise UsageError(
            f"{foreign[0]} is not a database pgdyno creates: `pgdyno datasets drop` removes only "
            f"pgdyno_tpl_s<scale>, pgdyno_tpl_tpcc_w<warehouses> and {BENCH_DB} (see `pgdyno "
            "datasets list`)."
        )


def choose_drops(
    footprint: Footprint, names: Sequence[str], every: bool, where: str
) -> list[PgdynoDatabase]:
    """The databases `datasets drop NAME... | --all` removes: the bench copy first (it is
    re-made from a template), then the templates. Anything not pgdyno's is refused."""
    check_drop_request(names, every)
    present = {d.name: d for d in footprint.databases}
    missing = [name for name in names if name not in present]
    if missing:
        raise UsageError(
            f"there is no database {missing[0]} on {where}: `pgdyno datasets list` shows what "
            "is there."
        )
    chosen = list(footprint.databases) if every else [present[n] for n in dict.fromkeys(names)]
    return sorted(chosen, key=lambda d: d.template)


def drop_databases(
    client: Client, databases: Sequence[PgdynoDatabase], done: Callable[[PgdynoDatabase], None]
) -> None:
    """DROP DATABASE each in turn, calling `done` after each. No FORCE: a database someone is
    connected to (a bench running, a psql session) is refused, not cut off."""
    for number, db in enumerate(databases):
        try:
            client.execute(compose("DROP DATABASE IF EXISTS {}", identifier(db.name)))
        except QueryRefused as exc:
            raise DatasetError(_drop_failed(db.name, exc, databases[:number])) from exc
        done(db)


def _drop_failed(name: str, exc: QueryRefused, dropped: Sequence[PgdynoDatabase]) -> str:
    so_far = f" ({', '.join(d.name for d in dropped)} dropped)" if dropped else ""
    if exc.sqlstate == OBJECT_IN_USE:
        return (
            f"cannot drop {name}{so_far}: another session is connected to it (a running "
            "bench?); close that session or let it finish, then try again."
        )
    if isinstance(exc, InsufficientPrivilege):
        return (
            f"may not drop {name}{so_far} ({exc.reason}): connect as the role that created it "
            "or a superuser."
        )
    return f"could not drop {name}{so_far} ({exc.reason}); check the server's log."


# -- render -------------------------------------------------------------------------------------


def mib(size: int | None) -> str:
    """
    >>> mib(75 * 1024**2), mib(None)
    ('75 MiB', 'size unknown')
    """
    return "size unknown" if size is None else f"{size / 1024**2:,.0f} MiB"


def leftovers_line(left: Sequence[Leftover], where: str) -> str | None:
    """The one line `bench` ends with: what it left on the server and how to remove it.

    >>> leftovers_line([Leftover("database", "pgdyno_bench", 2 * 1024**2, True)], "the sandbox")
    'left on the sandbox: pgdyno_bench 2 MiB (created); `pgdyno datasets drop` removes them'
    """
    if not left:
        return None
    return (
        f"left on {where}: {', '.join(_described(item) for item in left)}; "
        "`pgdyno datasets drop` removes them"
    )


def _described(item: Leftover) -> str:
    how = "created" if item.created else "reused"
    if item.kind == "extension":
        return f"extension {item.name} in {item.database} ({how})"
    return f"{item.name} {mib(item.bytes)} ({how})"


def footprint_lines(footprint: Footprint, where: str) -> list[str]:
    """`datasets list` as plain lines, one object a line."""
    lines = [f"pgdyno's objects on {where}:"]
    for db in footprint.databases:
        what = f"template scale {db.scale}" if db.template else "bench copy"
        if db.template and not db.complete:
            what += " (incomplete: generation was interrupted)"
        elif not db.template and db.scale is not None:
            what += f" of scale {db.scale}"
        lines.append(f"  database {db.name:<20} {mib(db.bytes):>14}  {what}")
    for ext in footprint.extensions:
        lines.append(f"  extension {ext.name} {ext.version} in {ext.database}  created by pgdyno")
    if not footprint.databases and not footprint.extensions:
        lines.append("  none")
    if footprint.auto_conf is not None:
        count = len(footprint.auto_conf)
        lines.append(f"postgresql.auto.conf ({count} setting{'' if count == 1 else 's'}):")
        lines.extend(_auto_conf_line(s) for s in footprint.auto_conf)
    lines.extend(footprint.notes)
    return lines


def _auto_conf_line(setting: AutoConfSetting) -> str:
    state = ""
    if not setting.applied:
        state = f"  (not applied: {setting.error})" if setting.error else "  (not applied)"
    by = "  set by pgdyno tune --apply (pgdyno rollback undoes it)" if setting.set_by_pgdyno else ""
    return f"  {setting.name} = {setting.setting}{state}{by}"


def footprint_json(footprint: Footprint, where: str) -> dict[str, object]:
    auto_conf = footprint.auto_conf
    return {
        "target": where,
        "databases": [d.as_json() for d in footprint.databases],
        "extensions": [e.as_json() for e in footprint.extensions],
        "auto_conf": None if auto_conf is None else [s.as_json() for s in auto_conf],
        "notes": list(footprint.notes),
    }
