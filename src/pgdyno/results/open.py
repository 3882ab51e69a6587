"""Open the results store a command was given: a SQLite file or a PostgreSQL database.

A writing command gets the schema brought up to date and is refused at once where it could not
store runs. A reading command (runs, report, doctor) opens the store read-only and reads it as
it is: a SQLite file with `mode=ro` (an export read with --results keeps its checksum), a
PostgreSQL session whose transactions are read-only (a role with SELECT alone reads it), never
a migration of the store itself. A SQLite file an older pgdyno wrote is read through a private
copy brought up to date (as `runs import` reads an export), removed when the store is closed or
the process ends; an older PostgreSQL schema is named in one sentence.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from contextlib import suppress
from pathlib import Path

from pgdyno.environment import ResultsLocation
from pgdyno.errors import NoResultsYet, StoreError, UsageError
from pgdyno.results.database import Database
from pgdyno.results.migrate import check_readable, latest_version
from pgdyno.results.owners import any_abandoned
from pgdyno.results.postgres_db import PostgresDatabase
from pgdyno.results.sqlite_db import SqliteDatabase
from pgdyno.results.store import ResultsStore
from pgdyno.results.uids import any_missing


def open_results(location: ResultsLocation, *, writing: bool = True) -> ResultsStore:
    """The store at `location`, for writing (the default) or, `writing=False`, for reading:
    then there must be results there already (NoResultsYet in one sentence otherwise, instead
    of creating an empty database)."""
    if not writing:
        return _for_reading(location)
    if location.conninfo is None:
        assert location.path is not None  # one of the two is always set
        if location.given:
            refuse_unusable_file(location.path)
        return ResultsStore(location.path)
    db = PostgresDatabase(location.conninfo)
    try:
        db.check_not_managed()
        db.migrate()
        db.check_writable()
        return ResultsStore(db)
    except BaseException:
        db.close()
        raise


def _for_reading(location: ResultsLocation) -> ResultsStore:
    db = _read_only(location)
    try:
        # A private copy is tidied as it is brought up to date; the file it copies stays as is.
        private = isinstance(db, SqliteDatabase) and db.path != db.shown_as
        if not private and (any_abandoned(db) or any_missing(db)):
            _tidy(location)
        return ResultsStore(db, writing=False)
    except BaseException:
        db.close()
        raise


def _read_only(location: ResultsLocation) -> Database:
    db: Database
    if location.conninfo is None:
        assert location.path is not None
        if location.given:
            refuse_unusable_file(location.path)
        if not location.path.exists():
            raise _nothing_yet(str(location))
        db, where = SqliteDatabase(location.path, writing=False), str(location)
    else:
        db = PostgresDatabase(location.conninfo, read_only=True)
        where = db.label
    try:
        have = db.schema_version()
        if have == 0:
            raise _nothing_yet(where)
        if location.path is not None and have < latest_version():
            db.close()
            return _migrated_copy(location.path)
        check_readable(db.where, have)
    except BaseException:
        db.close()
        raise
    return db


def _migrated_copy(path: Path) -> Database:
    """A private copy of the SQLite file at `path`, brought up to this pgdyno's schema, named
    as the file it copies; the copy's directory goes when the database object does (closed and
    collected, or at exit), and the file itself is never written."""
    scratch = tempfile.mkdtemp(prefix="pgdyno-read-")
    try:
        copy = Path(scratch) / path.name
        shutil.copyfile(path, copy)
        db = SqliteDatabase(copy, shown_as=path)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    weakref.finalize(db, shutil.rmtree, scratch, True)
    return db


def _tidy(location: ResultsLocation) -> None:
    """Sessions and comparisons a killed pgdyno of this host left 'running' are marked
    'interrupted' (and rows from before uids get theirs) by a short writing connection, as any
    writing command would; where this user may not write, they are read as they are."""
    with suppress(StoreError, UsageError):
        open_results(location).close()  # a writing store tidies as it opens


def refuse_unusable_file(path: Path) -> None:
    """Refuse, before SQLite opens anything (it would write `PATH-journal` beside it), a results
    path that is neither a regular file nor a new file in a directory that exists."""
    if path.exists() and not path.is_file() and not path.is_dir():  # a directory: said later
        raise UsageError(
            f"the results database {path} is not a regular file (a device, pipe or socket): "
            "pass --results with the path of a results file, or of a new one."
        )
    if not path.exists() and not path.parent.is_dir():
        raise UsageError(
            f"there is no directory {path.parent} for the results database {path.name}: create "
            "it first (pgdyno makes only its own work directory) or pass another --results file."
        )


def _nothing_yet(where: str) -> NoResultsYet:
    return NoResultsYet(
        f"there is no results database at {where} yet: run `pgdyno bench` first or pass "
        "--results FILE or DSN."
    )
