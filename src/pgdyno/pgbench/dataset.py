"""Prepared datasets: generated once into a template database, copied for each run.

`pgbench -i` runs once per scale into `pgdyno_tpl_s<scale>`, the TPC-C-like loader
(pgdyno.tpcc.load) once per warehouse count into `pgdyno_tpl_tpcc_w<warehouses>`; a comment on
that database marks it complete, so an interrupted generation (even a SIGKILL) leaves a template
without it, which the next attempt drops and makes again. Before a run the bench database is
re-created from the template with a file copy, so every run starts from the same data state
without generating the data again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pgdyno import process
from pgdyno.errors import (
    DatasetError,
    InsufficientPrivilege,
    PgdynoError,
    ProcessError,
    QueryRefused,
)
from pgdyno.pgbench.command import INIT_STEPS, init_argv
from pgdyno.postgres import databases
from pgdyno.postgres.client import Client, connect, with_dbname
from pgdyno.postgres.footprint import (
    BENCH_DB,
    EXTENSION_NOTE,
    MARKER_PREFIX,
    PRISTINE,
)
from pgdyno.postgres.footprint import template_name as footprint_template_name
from pgdyno.records import Event
from pgdyno.tpcc import load as tpcc_load

# The bench copy's comment once a writing run changed it (PRISTINE, in postgres/footprint.py, is
# the other one).
IN_USE = "pgdyno bench: changed by a writing run"


@dataclass(frozen=True)
class Dataset:
    template: str
    scale: int  # pgbench's scale, or the TPC-C-like workload's warehouses
    size_bytes: int
    generated: bool  # False when an existing template was reused
    prepare_seconds: float
    kind: str = "pgbench"  # or "tpcc"
    table_bytes: int | None = None  # heap of the tables, when generated (load throughput)
    ready_at: float = 0.0  # epoch seconds

    def event(self) -> Event:
        """The dataset as the first run on it records it: reused or made, how long it took,
        how large it is (issue 21: load time and size kept with the runs)."""
        return Event(self.ready_at, "dataset_ready", {
            "template": self.template, "kind": self.kind, "scale": self.scale,
            "generated": self.generated, "seconds": round(self.prepare_seconds, 3),
            "size_bytes": self.size_bytes, "table_bytes": self.table_bytes,
        })  # fmt: skip


def template_name(scale: int, kind: str = "pgbench") -> str:
    """
    >>> template_name(10), template_name(3, "tpcc")
    ('pgdyno_tpl_s10', 'pgdyno_tpl_tpcc_w3')
    """
    return footprint_template_name(scale, kind)


def marker(scale: int, steps: str = INIT_STEPS, kind: str = "pgbench") -> str:
    """
    >>> marker(2, kind="tpcc")
    'pgdyno dataset v1 tpcc warehouses=2 ready'
    """
    if kind == "tpcc":
        return f"{MARKER_PREFIX} tpcc warehouses={scale} ready"
    return f"{MARKER_PREFIX} scale={scale} init={steps} ready"


def ready_templates(client: Client) -> dict[str, int]:
    """Complete templates on the server: name -> size in bytes."""
    return {
        found.datname: found.size_bytes
        for found in databases.templates(client)
        if found.marker and found.marker.startswith(MARKER_PREFIX)
    }


def _drop(client: Client, dbname: str) -> None:
    databases.drop_database(client, dbname)


@dataclass(frozen=True)
class Generator:
    """How to make a missing template: the dataset's kind, pgbench for its -i, the environment
    pgbench runs in, the password and the parallel sessions of the TPC-C-like loader."""

    kind: str = "pgbench"
    pgbench: Path | None = None
    env: Mapping[str, str] | None = None
    password: str | None = None
    sessions: int = 1


def ensure_dataset(client: Client, scale: int, how: Generator) -> Dataset:
    """The template for `scale` (warehouses for TPC-C), generated only when no complete one
    exists."""
    started = time.monotonic()
    name = template_name(scale, how.kind)
    what = f"tpcc warehouses {scale}" if how.kind == "tpcc" else f"scale {scale}"
    existing = ready_templates(client)
    if name in existing:
        took = time.monotonic() - started
        return Dataset(name, scale, existing[name], False, took, how.kind, None, time.time())
    with _as_dataset_error(f"creating the database {name} for {what}"):
        _drop(client, name)  # an incomplete one from an interrupted run
        databases.create_database(client, name)
    table_bytes = None
    try:
        if how.kind == "tpcc":
            loaded = tpcc_load.load(
                with_dbname(client.dsn, name), how.password, scale, sessions=how.sessions
            )
            table_bytes = loaded.table_bytes
        else:
            _pgbench_init(client, name, scale, how)
    except BaseException:  # a failure, ^C or SIGTERM: no half-made template stays behind
        # (after a SIGKILL the next attempt drops it: it has no marker). The first error is
        # the story; a connection lost meanwhile must not replace it.
        with contextlib.suppress(PgdynoError):
            _drop(client, name)
        raise
    with _as_dataset_error(f"finishing the dataset {name}"):
        _comment(client, name, marker(scale, kind=how.kind))
        _checkpoint(client)
        size = databases.database_size(client, name)
    took = time.monotonic() - started
    return Dataset(name, scale, size, True, took, how.kind, table_bytes, time.time())


def _pgbench_init(client: Client, name: str, scale: int, how: Generator) -> None:
    if how.pgbench is None:
        raise ValueError("a pgbench dataset needs pgbench")
    try:
        process.run(
            init_argv(how.pgbench, with_dbname(client.dsn, name), scale),
            what=f"pgbench -i -s {scale}",
            env=how.env,
            timeout=None,
        )
    except ProcessError as exc:
        if "No space left on device" in exc.stderr:
            raise DatasetError(
                f"the disk under the database filled up while generating scale {scale}: free "
                "some space or choose a smaller --scale."
            ) from exc
        reason = process.last_line(exc.stderr)
        raise DatasetError(
            f"generating the dataset (pgbench -i -s {scale}) failed: {reason}"
        ) from exc


@contextlib.contextmanager
def _as_dataset_error(doing: str) -> Iterator[None]:
    """A failed statement while preparing a dataset (a full disk, a missing right) becomes one
    sentence; a lost connection stays ConnectionLost (it is not the dataset's fault)."""
    try:
        yield
    except QueryRefused as exc:
        raise DatasetError(
            f"{doing} failed ({exc.reason}); check free disk space and that the role "
            "may create databases."
        ) from exc


def _checkpoint(client: Client) -> None:
    """Write the new dataset to disk now, not during the first measured run.

    Needs superuser or pg_checkpoint (15+); without it the copy's own checkpoint does it."""
    with contextlib.suppress(InsufficientPrivilege):
        databases.checkpoint(client)


def reset_bench_db(client: Client, template: str, server_version_num: int) -> None:
    """Re-create the bench database as a copy of `template`.

    A file copy (STRATEGY FILE_COPY, PostgreSQL 15+) is flushed to disk before the run starts,
    so no write-back of the copy lands inside a measured run. From PostgreSQL 18 the copy is
    done by the kernel (file_copy_method = clone: copy_file_range, a reflink where the
    filesystem has them), falling back to a plain copy where that is refused.
    """
    _drop(client, BENCH_DB)

    def create() -> None:
        databases.copy_database(client, BENCH_DB, template, version_num=server_version_num)

    try:
        if server_version_num >= 180000:
            try:
                databases.clone_copy(client, True)
                create()
                _comment(client, BENCH_DB, PRISTINE.format(template=template))
                return
            except QueryRefused:
                _drop(client, BENCH_DB)
            finally:
                databases.clone_copy(client, False)
        create()
        _comment(client, BENCH_DB, PRISTINE.format(template=template))
    except QueryRefused as exc:
        raise DatasetError(
            f"could not copy dataset {template} into {BENCH_DB} ({exc.server_message}); "
            "check free disk space and that nobody is connected to the template."
        ) from exc


def _comment(client: Client, dbname: str, text: str) -> None:
    databases.comment_on_database(client, dbname, text)


def prewarm(dsn: str, password: str | None) -> int:
    """Read the bench database into shared buffers (and the page cache) with pg_prewarm.

    Every set of a comparison then starts its runs from the same warm state, even after a
    restart emptied shared buffers, instead of spending the measured run warming up. Returns
    the blocks read. Needs the pg_prewarm extension (contrib), created here if missing.
    """
    with connect(with_dbname(dsn, BENCH_DB), password) as client:
        try:
            _create_extension(client, "pg_prewarm")
            blocks = 0
            for relation in databases.prewarm_relations(client):
                blocks += databases.prewarm_relation(client, relation.oid)
        except QueryRefused as exc:
            raise DatasetError(
                f"prewarm failed ({exc.reason}); install PostgreSQL's "
                "contrib modules (pg_prewarm) or leave prewarm off."
            ) from exc
    return blocks


def _create_extension(client: Client, name: str) -> None:
    """CREATE EXTENSION when missing, with pgdyno's comment on it (only on one it created)."""
    if databases.has_extension(client, name):
        return
    databases.create_extension(client, name, EXTENSION_NOTE)


def is_pristine(client: Client, template: str) -> bool:
    """True when the bench database is an untouched copy of `template`."""
    return databases.database_comment(client, BENCH_DB) == PRISTINE.format(template=template)


def mark_in_use(client: Client) -> None:
    """Called before a run that may write: the copy is no longer pristine."""
    _comment(client, BENCH_DB, IN_USE)


def drop_datasets(client: Client) -> list[str]:
    names = [*ready_templates(client)]
    for name in [*names, BENCH_DB]:
        _drop(client, name)
    return names
