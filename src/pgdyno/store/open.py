"""Open the results store a command was given: a SQLite file or a PostgreSQL database."""

from __future__ import annotations

from pgdyno.environment import ResultsLocation
from pgdyno.errors import UsageError
from pgdyno.store.postgres_db import PostgresDatabase
from pgdyno.store.results import ResultsStore


def open_results(
    location: ResultsLocation, *, writing: bool = True, must_exist: bool = False
) -> ResultsStore:
    """The store at `location`, its schema brought up to date.

    `must_exist`: a command that only reads (runs, report) is refused with one sentence when
    there are no results there yet, instead of creating an empty database."""
    if location.conninfo is None:
        assert location.path is not None  # one of the two is always set
        if must_exist and not location.path.exists():
            raise _nothing_yet(str(location))
        return ResultsStore(location.path, writing=writing)
    db = PostgresDatabase(location.conninfo)
    try:
        if must_exist and db.schema_version() == 0:
            raise _nothing_yet(db.label)
        if writing:
            db.check_not_managed()
        db.migrate()
        if writing:
            db.check_writable()
        return ResultsStore(db, writing=writing)
    except BaseException:
        db.close()
        raise


def _nothing_yet(where: str) -> UsageError:
    return UsageError(
        f"there is no results database at {where} yet: run `pgdyno bench` first or pass "
        "--results FILE or DSN."
    )
