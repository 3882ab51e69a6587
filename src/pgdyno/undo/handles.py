"""The servers pgdyno changes, and how to reach and (with consent) restart them.

A restart needs consent. The sandbox is pgdyno's own: `--yes` is the consent, and pgdyno's
pg_ctl restarts it. An existing server is restarted only by the user's `--restart-command`
(split like a shell would, run without one, refused up front when the program does not exist)
or, when its data directory is on this host, by pg_ctl run as the directory's owner with the
owner's groups (a packaged server reads its SSL key through the `ssl-cert` group); never by a
command read from a file. pg_ctl is the one of the server's own installation (from
postmaster.opts) and the server keeps logging where it logged: no file is left in the data
directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgdyno import process
from pgdyno.environment import Environment
from pgdyno.errors import ProcessError, UsageError
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import RunAs

Restart = Callable[[], None]


@dataclass
class ServerHandle:
    """How to reach (and, with consent, restart) a server pgdyno changes."""

    label: str
    dsn: str
    password: str | None
    identity: dict[str, str]  # the journal's `server` field
    restart: Restart | None  # None: no consent to restart
    # pgdyno's sandbox only: a restart in two halves, so that host settings (huge pages the
    # server holds) can be restored while it is down.
    stop: Restart | None = None
    start: Restart | None = None
    # On this host: postgresql.auto.conf can be put back while the server is down, and the
    # server's own start-up messages are read from `log`.
    data_dir: Path | None = None
    log: Callable[[], Path | None] | None = None

    def without_restart(self) -> ServerHandle:
        return ServerHandle(
            self.label, self.dsn, self.password, self.identity, None, None, None,
            self.data_dir, self.log,
        )  # fmt: skip


def sandbox_identity(box: Sandbox) -> dict[str, str]:
    return {"kind": "sandbox", "cluster": box.root.name}


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
        identity=sandbox_identity(box),
        restart=restart if consent else None,
        stop=stop if consent else None,
        start=start if consent else None,
        data_dir=box.data_dir,
        log=lambda: box.log_file,
    )


def server_handle(
    dsn: str,
    password: str | None,
    label: str,
    *,
    restart_command: str | None,
    consent: bool,
    data_dir: Path | None,
    env: Environment,
) -> ServerHandle:
    """An existing server. Without consent (`--yes`) nothing restarts it. A restart command
    whose program does not exist is refused here, before anything changes. pg_ctl's binaries
    come from `env`'s cache, its log goes to the work directory's logs/."""
    command = _command(restart_command) if restart_command else None
    restart: Restart | None = None
    log: Callable[[], Path | None] | None = None
    if consent and command is not None:
        restart = command
    elif consent and data_dir is not None:
        ctl = PgCtl(data_dir, env.cache_dir, env.data_dir / "logs")
        restart, log = ctl.restart, ctl.log_file
    identity = {"kind": "server", "dsn": dsn}
    if data_dir is not None:
        identity["data_dir"] = str(data_dir)
    return ServerHandle(label, dsn, password, identity, restart, data_dir=data_dir, log=log)


def over_ssh(handle: ServerHandle, ssh: str, remote_dsn: str) -> ServerHandle:
    """The handle of a server reached through a port forwarded over SSH: the journal knows it
    by its host and its connection string there (the forwarded port changes every time), so
    `pgdyno rollback` can reach it again."""
    handle.identity = {"kind": "server", "dsn": remote_dsn, "ssh": ssh}
    return handle


def _command(text: str) -> Restart:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--restart-command is not a command line ({exc}): quote it.") from None
    if not argv:
        raise UsageError("--restart-command is empty: give the command that restarts the server.")
    if shutil.which(argv[0]) is None:
        raise UsageError(
            f"--restart-command names {argv[0]!r}, which is not an executable program here: "
            "give the full path of the command that restarts the server."
        )

    def restart() -> None:
        process.run(argv, what="the restart command", timeout=300)

    return restart


class PgCtl:
    """pg_ctl restart of a data directory on this host, as its owner with the owner's groups."""

    def __init__(self, data_dir: Path, cache_dir: Path, log_dir: Path) -> None:
        self.data_dir = data_dir
        self.cache_dir = cache_dir
        self.log_dir = log_dir
        self._log: Path | None = None

    def bin_dir(self) -> Path:
        """The server's own installation (postmaster.opts names its postgres), else pgdyno's
        binaries of the data directory's major version (PG_VERSION)."""
        try:
            opts = shlex.split((self.data_dir / "postmaster.opts").read_text())
        except (OSError, ValueError):
            opts = []
        if opts and (Path(opts[0]).parent / "pg_ctl").is_file():
            return Path(opts[0]).parent
        return self._binaries().bin_dir

    def _binaries(self) -> Binaries:
        try:
            major = int((self.data_dir / "PG_VERSION").read_text().strip())
        except (OSError, ValueError):
            raise UsageError(
                f"{self.data_dir} has no readable PG_VERSION: give the data directory of the "
                "server, or --restart-command."
            ) from None
        return resolve(None, major, self.cache_dir)

    def log_file(self) -> Path | None:
        return self._log

    def _choose_log(self, owner: RunAs | None) -> Path:
        """Where the running postmaster writes its messages (its standard error, as a packaged
        server's pg_ctlcluster sets it), so the restarted one goes on there; else a file in
        pgdyno's work directory. Never the data directory."""
        current = _stderr_file(self.data_dir)
        if current is not None:
            return current
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"restart-{self.data_dir.name}.log"
        path.touch(exist_ok=True)
        if owner is not None:
            os.chown(path, owner.uid, owner.gid)
        return path

    def restart(self) -> None:
        owner_uid = self.data_dir.stat().st_uid
        owner = None if owner_uid == os.geteuid() else RunAs.of_uid(owner_uid)
        self._log = self._choose_log(owner)
        try:
            process.run(
                [self.bin_dir() / "pg_ctl", "restart", "-D", self.data_dir, "-m", "fast", "-w",
                 "-t", "120", "-s", "-l", self._log],
                what="pg_ctl restart", run_as=owner, cwd=Path("/"), timeout=300,
            )  # fmt: skip
        except ProcessError as exc:
            raise ProcessError(f"{exc} (server log: {self._log})", exc.stderr) from exc


def _stderr_file(data_dir: Path) -> Path | None:
    """The regular file the data directory's running postmaster has as standard error."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
        target = Path(f"/proc/{pid}/fd/2").readlink()
    except (OSError, ValueError, IndexError):
        return None
    if not target.is_absolute() or not target.is_file():
        return None
    return target
