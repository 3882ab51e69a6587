"""The hosts file of `pgdyno fleet run`: which hosts, how to reach them and their servers.

    [[host]]
    name = "db-a"                                  # a label, also its directory name
    ssh = "bench@db-a"                             # [user@]host, an ssh_config alias, ssh://
    dsn = "host=/var/run/postgresql dbname=postgres"   # the server as that host sees it

A password may be given in `dsn` (libpq's ~/.pgpass on this machine works too); it reaches the
host's pgdyno through its environment, never a command line, and is never printed or stored.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from pgdyno.errors import UsageError
from pgdyno.fleet.status import RESERVED
from pgdyno.postgres.client import endpoint, split_password

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class HostSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(pattern=NAME.pattern)]
    ssh: Annotated[str, StringConstraints(min_length=1)]
    dsn: Annotated[str, StringConstraints(min_length=1)]


class HostsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: Annotated[list[HostSpec], Field(min_length=1)]


def load_hosts(path: Path) -> list[HostSpec]:
    """The hosts of the file, checked; UsageError with one sentence naming what is wrong."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read the hosts file {path} ({exc.strerror}).") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a TOML file ({exc}); see docs/fleet.md.") from None
    try:
        hosts = HostsFile.model_validate(data).host
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise UsageError(f"{path}: {where}: {error['msg']} (each [[host]] has name, ssh and "
                         "dsn; see docs/fleet.md).") from None  # fmt: skip
    names = [h.name for h in hosts]
    if taken := sorted(set(names) & set(RESERVED)):
        raise UsageError(
            f"{path}: host name {taken[0]!r} is the name of a file pgdyno keeps beside the "
            "hosts' directories (each host's name is also its directory's): rename the host."
        )
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise UsageError(f"{path}: host name {twice[0]!r} is given twice: names must differ.")
    _one_benchmark_per_server(path, hosts)
    return hosts


def _one_benchmark_per_server(path: Path, hosts: list[HostSpec]) -> None:
    """Refuse two hosts that reach the same server (same ssh destination, same socket or
    address and port in dsn): their datasets and settings would clobber each other. A server
    reached under two different names is caught when it runs, by its benchmark lock."""
    seen: dict[tuple[str, str, int], str] = {}
    for host in hosts:
        clean, _ = split_password(host.dsn, f"{path}: {host.name}'s dsn")
        try:
            server = (host.ssh.lower(), *endpoint(clean))
        except UsageError:
            continue  # a dsn without one host: its own child names what is wrong
        if server in seen:
            raise UsageError(
                f"{path}: hosts {seen[server]!r} and {host.name!r} name the same server "
                f"({host.ssh}, {server[1]}), and one server runs one benchmark at a time: list "
                "it once."
            )
        seen[server] = host.name
