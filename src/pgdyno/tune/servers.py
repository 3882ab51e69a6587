"""The servers `tune --apply`, `compare --dsn` and `rollback` change: how to reach and restart them.

A restart needs consent. The sandbox is pgdyno's own: `--yes` is the consent, and pgdyno's
pg_ctl restarts it. An existing server is restarted only by the user's `--restart-command`
(split like a shell would, run without one) or, when its data directory is on this host, by
pg_ctl run as the directory's owner; never by a command read from a file.
"""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Callable
from pathlib import Path

from pgdyno import process
from pgdyno.errors import UsageError
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import RunAs
from pgdyno.tune.apply import Restart, ServerHandle


def sandbox_handle(box: Sandbox, *, consent: bool, owner_pid: int | None) -> ServerHandle:
    """The sandbox `box` (running). Restarting keeps its owner (who stops it later)."""

    def start() -> None:
        box.start({}, owner_pid=owner_pid)

    def stop() -> None:
        box.stop()

    def restart() -> None:
        stop()
        start()

    return ServerHandle(
        label=f"sandbox {box.root.name}",
        dsn=box.conninfo(),
        password=None,
        identity={"kind": "sandbox", "cluster": box.root.name},
        restart=restart if consent else None,
        stop=stop if consent else None,
        start=start if consent else None,
    )


def server_handle(
    dsn: str,
    password: str | None,
    label: str,
    *,
    restart_command: str | None,
    consent: bool,
    data_dir: Path | None,
    binaries: Callable[[], Binaries] | None,
) -> ServerHandle:
    """An existing server. Without consent (`--yes`) nothing restarts it."""
    restart: Restart | None = None
    if consent and restart_command:
        restart = _command(restart_command)
    elif consent and data_dir is not None and binaries is not None:
        restart = _pg_ctl(data_dir, binaries)
    identity = {"kind": "server", "dsn": dsn}
    if data_dir is not None:
        identity["data_dir"] = str(data_dir)
    return ServerHandle(label, dsn, password, identity, restart)


def _command(text: str) -> Restart:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--restart-command is not a command line ({exc}): quote it.") from None
    if not argv:
        raise UsageError("--restart-command is empty: give the command that restarts the server.")

    def restart() -> None:
        process.run(argv, what="the restart command", timeout=300)

    return restart


def binaries_for(data_dir: Path, cache_dir: Path) -> Callable[[], Binaries]:
    """pg_ctl of the data directory's own major version (PG_VERSION): binaries of another
    version would stop the server and then fail to start it."""

    def pick() -> Binaries:
        try:
            major = int((data_dir / "PG_VERSION").read_text().strip())
        except (OSError, ValueError):
            raise UsageError(
                f"{data_dir} has no readable PG_VERSION: give the data directory of the server, "
                "or --restart-command."
            ) from None
        return resolve(None, major, cache_dir)

    return pick


def _pg_ctl(data_dir: Path, binaries: Callable[[], Binaries]) -> Restart:
    def restart() -> None:
        owner = data_dir.stat().st_uid
        run_as = None if owner == os.geteuid() else _user(owner)
        process.run(
            [binaries().bin_dir / "pg_ctl", "restart", "-D", data_dir, "-m", "fast", "-w",
             "-t", "120", "-s", "-l", data_dir / "pgdyno-restart.log"],
            what="pg_ctl restart", run_as=run_as, cwd=Path("/"), timeout=300,
        )  # fmt: skip

    return restart


def _user(uid: int) -> RunAs:
    entry = pwd.getpwuid(uid)
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)
