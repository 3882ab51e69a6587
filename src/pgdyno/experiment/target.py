"""Where runs go: the sandbox cluster pgdyno manages, or an existing server."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.errors import ClusterError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import describe, split_password
from pgdyno.postgres.cluster import Sandbox, cluster_name, recover, taken_ports
from pgdyno.postgres.sandbox_user import sandbox_user


@dataclass(frozen=True)
class Target:
    label: str  # for tables and the results database; never holds a password
    dsn: str  # maintenance connection (no password)
    password: str | None
    binaries: Binaries  # pgbench comes from here
    data_path: Path | None  # where the server keeps its data, when it is on this host
    server_log: Path | None = None  # the sandbox's log file (checkpoint events)

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """Environment for pgbench: the password travels here, never on the command line."""
        env = dict(base)
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        return env


@contextmanager
def workdir_lock(env: Environment) -> Iterator[None]:
    """One pgdyno command at a time may drive the sandboxes of a work directory."""
    env.data_dir.mkdir(parents=True, exist_ok=True)
    path = env.data_dir / "pgdyno.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ClusterError(
                f"another pgdyno command (pid {holder}) is using {env.data_dir}: wait for it to "
                "finish or use another --workdir."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()


def open_sandbox(env: Environment, binaries: Binaries, log: Callable[[str], None]) -> Sandbox:
    """The sandbox for these binaries' major version, created when missing; leftovers recovered."""
    run_as = sandbox_user(env.is_root)
    for note in recover(env.clusters_dir, run_as):
        log(note)
    box = Sandbox(env.clusters_dir / cluster_name(binaries.major), run_as)
    if not box.exists():
        log(f"creating sandbox {box.root.name} (PostgreSQL {binaries.version}) in {box.root}")
        box.init(binaries, taken_ports(env.clusters_dir))
    return box


@contextmanager
def sandbox_target(
    env: Environment,
    binaries: Binaries,
    settings: Mapping[str, str],
    log: Callable[[str], None],
) -> Iterator[Target]:
    """A running sandbox for the duration of the block; stopped again if this started it."""
    box = open_sandbox(env, binaries, log)
    started_here = False
    if box.postmaster_pid() is None:
        box.start(
            settings, owner_pid=os.getpid(), binaries=binaries,
            taken_ports=taken_ports(env.clusters_dir),
        )  # fmt: skip
        started_here = True
    elif settings:
        raise ClusterError(
            f"sandbox {box.root.name} is already running, so --set cannot apply: stop it with "
            "`pgdyno sandbox stop` first."
        )
    try:
        yield Target(
            label=f"sandbox {box.root.name}",
            dsn=box.conninfo(),
            password=None,
            binaries=box.binaries(),
            data_path=box.data_dir,
            server_log=box.log_file,
        )
    finally:
        if started_here:
            box.stop()


def server_target(dsn: str, binaries: Binaries) -> Target:
    """An existing server; its password (if any) is split off and kept out of records."""
    clean, password = split_password(dsn)
    return Target(f"server {describe(clean)}", clean, password, binaries, None)
