"""Databases on a server: pgdyno's dataset templates, the bench database copied from one, their
comments (the markers), extensions, prewarming and sizes.

Typed functions over `Client`: each returns a frozen record or a plain value; the queries are in
queries/*.sql, the DDL (whose names cannot be parameters) is composed here with quoted
identifiers.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.postgres.client import Client, compose, identifier, literal
from pgdyno.postgres.queries import load


@dataclass(frozen=True)
class Template:
    """A database named like a dataset template (queries/dataset_templates.sql)."""

    datname: str
    marker: str | None  # its comment: pgdyno's marker that it is complete
    size_bytes: int


def templates(client: Client) -> list[Template]:
    """pgdyno's dataset templates on the server, by name."""
    return client.records(load("dataset_templates"), Template)


def drop_database(client: Client, name: str) -> None:
    """DROP DATABASE IF EXISTS ... WITH (FORCE): its sessions are ended."""
    client.execute(compose("DROP DATABASE IF EXISTS {} WITH (FORCE)", identifier(name)))


def create_database(client: Client, name: str) -> None:
    client.execute(compose("CREATE DATABASE {}", identifier(name)))


def copy_database(client: Client, name: str, template: str, *, version_num: int) -> None:
    """CREATE DATABASE `name` as a copy of `template`: a file copy (STRATEGY FILE_COPY, flushed
    before the statement ends) from PostgreSQL 15."""
    create = compose(
        "CREATE DATABASE {} TEMPLATE {}" + (" STRATEGY FILE_COPY" if version_num >= 150000 else ""),
        identifier(name),
        identifier(template),
    )
    client.execute(create)


def clone_copy(client: Client, on: bool) -> None:
    """SET (or RESET) file_copy_method = clone for this session (PostgreSQL 18+)."""
    client.execute(compose("SET file_copy_method = clone" if on else "RESET file_copy_method"))


def checkpoint(client: Client) -> None:
    client.execute(compose("CHECKPOINT"))


def comment_on_database(client: Client, name: str, text: str) -> None:
    client.execute(compose("COMMENT ON DATABASE {} IS {}", identifier(name), literal(text)))


@dataclass(frozen=True)
class _Comment:
    comment: str | None


def database_comment(client: Client, name: str) -> str | None:
    """The comment on a database; None when it has none or does not exist."""
    found = client.records(load("database_comment"), _Comment, {"db": name})
    return found[0].comment if found else None


@dataclass(frozen=True)
class _Size:
    size_bytes: int


def database_size(client: Client, name: str) -> int:
    return client.records(load("database_size"), _Size, {"dbname": name})[0].size_bytes


@dataclass(frozen=True)
class _Exists:
    found: bool


def has_extension(client: Client, name: str) -> bool:
    """Whether the extension is installed in the connected database."""
    return bool(client.records(load("extension_exists"), _Exists, {"name": name}))


def create_extension(client: Client, name: str, note: str) -> None:
    """CREATE EXTENSION IF NOT EXISTS with `note` as its comment."""
    client.execute(compose("CREATE EXTENSION IF NOT EXISTS {}", identifier(name)))
    client.execute(compose("COMMENT ON EXTENSION {} IS {}", identifier(name), literal(note)))


@dataclass(frozen=True)
class Relation:
    oid: int
    relname: str


@dataclass(frozen=True)
class _Blocks:
    blocks: int


def prewarm_relations(client: Client) -> list[Relation]:
    """The connected database's tables then indexes, each group largest first."""
    return client.records(load("prewarm_relations"), Relation)


def prewarm_relation(client: Client, oid: int) -> int:
    """pg_prewarm of one relation; the blocks it read."""
    return client.records(load("prewarm_relation"), _Blocks, {"oid": oid})[0].blocks
