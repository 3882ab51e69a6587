"""Export files: runs written out of any results store and merged into any other (issue 22).

The file is a SQLite results database (results/transfer.py says why) with one more table,
`export_info`. Writing goes to a temporary file renamed into place at the end, so a failed
export leaves no file; reading goes through a private copy, migrated if an older pgdyno wrote
it, so the file given is never changed; a foreign or damaged file (a table, a value or a JSON
column not as pgdyno writes it: results/validate.py) is refused whole before the target is
touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pgdyno import __version__
from pgdyno.errors import StoreError, StoreUnavailable, UsageError
from pgdyno.results.database import Database
from pgdyno.results.encode import now_iso
from pgdyno.results.sqlite_db import SqliteDatabase
from pgdyno.results.transfer import Copied, copy_runs, selected_run_ids
from pgdyno.results.validate import check_whole_file

_SQLITE_MAGIC = b"SQLite format 3\x00"
_PGDYNO_TABLES = {"schema_migrations", "sessions", "runs"}


def export_runs(source: Database, path: Path, run_ids: Sequence[int]) -> Copied:
    """Write `run_ids` of `source` to a new export file at `path`."""
    if path.exists():
        raise UsageError(f"{path} already exists: choose another file name or remove it first.")
    if not run_ids:
        raise UsageError("there is no run to export in this selection: see `pgdyno runs list`.")
    directory = path.parent if path.parent != Path() else Path.cwd()
    if not directory.is_dir():
        raise UsageError(f"there is no directory {directory} to write {path.name} into.")
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as exc:  # read-only, immutable (chattr +i) or a pseudo-filesystem (/proc)
        raise UsageError(
            f"cannot write the export {path} ({exc.strerror or exc}): choose a directory you can "
            "write files in."
        ) from None
    os.close(handle)
    partial = Path(name)
    try:
        partial.unlink()  # SQLite creates its own file (and its WAL beside it)
        target = SqliteDatabase(partial)
        try:
            copied = copy_runs(source, target, run_ids)
            with target.transaction():
                target.execute("CREATE TABLE export_info (key TEXT PRIMARY KEY, value TEXT)")
                target.executemany(
                    "INSERT INTO export_info VALUES (?, ?)",
                    [("format", "pgdyno export 1"), ("exported_at", now_iso()),
                     ("exported_from", str(source.where)), ("exported_by", socket.gethostname()),
                     ("pgdyno_version", __version__)],
                )  # fmt: skip
            target.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            target.close()
        partial.rename(path)
    except BaseException:
        for leftover in (partial, *(partial.with_name(partial.name + s) for s in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
        raise
    return copied


def _check_export(path: Path) -> None:
    """Refuse, in one sentence, a file that is not a pgdyno export or results database."""
    if not path.is_file():
        raise UsageError(f"there is no file {path} to import: give the path of an export.")
    with path.open("rb") as file:
        if file.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
            raise UsageError(
                f"{path} is not a pgdyno export (not a SQLite file): give a file written by "
                "`pgdyno runs export`."
            )
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreUnavailable(
            f"{path} is damaged ({exc}) and nothing was imported: export the runs again."
        ) from exc
    if not tables >= _PGDYNO_TABLES:
        raise UsageError(
            f"{path} is a SQLite file but not a pgdyno export (it has no runs table): give a "
            "file written by `pgdyno runs export`."
        )


def import_runs(target: Database, path: Path) -> Copied:
    """Merge every run of the export at `path` into `target`; runs it holds already are
    skipped, and nothing is added when anything fails."""
    _check_export(path)
    with tempfile.TemporaryDirectory(prefix="pgdyno-import-") as scratch:
        copy = Path(scratch) / "export.sqlite"
        shutil.copyfile(path, copy)
        try:
            source = SqliteDatabase(copy, shown_as=path)
        except StoreError as exc:
            raise StoreUnavailable(
                f"{path} cannot be read as a pgdyno export ({exc}); nothing was imported."
            ) from exc
        try:
            check_whole_file(source, path)  # before anything is added to the target
            return copy_runs(source, target, selected_run_ids(source))
        finally:
            source.close()
