"""`pgdyno datasets list|drop`: what pgdyno created on a server (the sandbox of a version, or
`--dsn`), and dropping it. What is pgdyno's, what a drop removes and how it is shown is
`pgdyno.postgres.footprint`; this module picks the server and marks what `tune --apply` wrote."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import (
    ServerAddress,
    locked_sandbox,
    sandbox_binaries,
    server_address,
)
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox, cluster_name
from pgdyno.postgres.footprint import (
    Footprint,
    PgdynoDatabase,
    check_drop_request,
    choose_drops,
    drop_databases,
    mib,
    read_footprint,
)
from pgdyno.undo.server import pending_changes, server_key

NOTHING = Footprint((), (), None, ())


@dataclass(frozen=True)
class Server:
    """The server looked at: `dsn`, or the sandbox of `pg_version` (or `pg_bin`'s)."""

    sandbox: bool
    dsn: str | None
    pg_bin: Path | None
    pg_version: int | None


@dataclass(frozen=True)
class Found:
    footprint: Footprint
    where: str  # the server's label


@dataclass(frozen=True)
class Dropped:
    databases: tuple[PgdynoDatabase, ...]
    where: str


def footprint(env: Environment, server: Server, log: Callable[[str], None]) -> Found:
    """pgdyno's databases, extensions and postgresql.auto.conf entries on the server."""
    with _server(env, server, log) as (address, where):
        found = NOTHING if address is None else read_footprint(address.dsn, address.password)
    if address is not None:
        on_sandbox = server.dsn is None
        found = _marked(env, found, where if on_sandbox else address.dsn, on_sandbox)
    return Found(found, where)


def drop(
    env: Environment,
    server: Server,
    names: tuple[str, ...],
    *,
    every: bool,
    yes: bool,
    log: Callable[[str], None],
) -> Dropped:
    """Drop the named pgdyno databases (or all of them); on an existing server only with `yes`."""
    check_drop_request(names, every)
    dropped: list[PgdynoDatabase] = []
    with _server(env, server, log) as (address, where):
        found = NOTHING if address is None else read_footprint(address.dsn, address.password)
        chosen = choose_drops(found, names, every, where)
        if address is not None and chosen:
            if server.dsn is not None and not yes:
                listed = ", ".join(f"{d.name} ({mib(d.bytes)})" for d in chosen)
                raise UsageError(f"this would drop {listed} from {where}: add --yes to drop.")
            with connect(address.dsn, address.password) as client:
                drop_databases(client, chosen, dropped.append)
    return Dropped(tuple(dropped), where)


def _marked(env: Environment, found: Footprint, name: str, sandbox: bool) -> Footprint:
    """Mark the postgresql.auto.conf entries that `pgdyno tune --apply` wrote (its journal
    holds them, not yet rolled back)."""
    if found.auto_conf is None:
        return found
    identity = (
        {"kind": "sandbox", "cluster": name.removeprefix("sandbox ")} if sandbox
        else {"kind": "server", "dsn": name}
    )  # fmt: skip
    ours = {
        c.name
        for c in pending_changes(env.data_dir)
        if server_key(c.server) == server_key(identity)
    }
    marked = tuple(replace(row, set_by_pgdyno=row.name in ours) for row in found.auto_conf)
    return replace(found, auto_conf=marked)


@contextmanager
def _server(
    env: Environment, server: Server, log: Callable[[str], None]
) -> Iterator[tuple[ServerAddress | None, str]]:
    """The server to look at and its label: `dsn`, or the sandbox (started for the block if it
    was not running, with the work directory locked). None when that sandbox does not exist:
    nothing of pgdyno's can be in it, and none is created just to say so."""
    if server.sandbox and server.dsn is not None:
        raise UsageError("give --sandbox or --dsn, not both.")
    if server.dsn is not None:
        address = server_address(server.dsn)
        yield address, address.label
        return
    binaries = sandbox_binaries(env, server.pg_bin, server.pg_version, log)
    name = cluster_name(binaries.major)
    if not Sandbox(env.clusters_dir / name, None).exists():
        yield None, f"sandbox {name} (not created yet)"
        return
    with locked_sandbox(env, binaries, {}, log) as target:
        yield ServerAddress(target.dsn, target.password, target.label), target.label
