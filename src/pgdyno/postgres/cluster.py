"""The sandbox cluster: a PostgreSQL data directory that pgdyno creates, starts and stops.

Layout under `<workdir>/clusters/pg<major>/`:

    cluster.json   what pgdyno knows: binaries, port, OS user, which pgdyno started it
    data/          the data directory (postgresql.conf includes the two pgdyno files below)
      pgdyno.base.conf      port, socket directory, local-only listening, logging
      pgdyno.settings.conf  the settings map of the current start (rewritten on every start)
    socket/        the Unix socket directory (only this cluster's socket)
    log/postgresql.log

Authentication: trust on the Unix socket only; TCP is bound to 127.0.0.1 and requires a
password (none is set), so nothing but local socket clients can log in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pgdyno import process
from pgdyno.errors import ClusterError, ProcessError, UsageError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.conf import quote_value, refused_settings, render_settings
from pgdyno.postgres.sandbox_user import hand_over, require_reachable
from pgdyno.process import RunAs
from pgdyno.records import Status
from pgdyno.textsafe import strict_json

SUPERUSER = "postgres"
PORT_TRIES = 3  # starts tried when another server takes the chosen port meanwhile
HBA = """\
# Written by pgdyno: trust on the Unix socket only; TCP needs a password (none is set).
local   all   all                  trust
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""


# The watchdog process of each cluster this process started for itself (postgres/watchdog.py).
_watchdogs: dict[Path, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ClusterState:
    name: str
    version: str
    bin_dir: str
    port: int
    os_user: str
    # pid of the pgdyno command that started the cluster for itself and will stop it;
    # None when it was started on purpose (`pgdyno sandbox start`) or is stopped.
    owner_pid: int | None = None
    owner_started: int | None = None  # the owner's start time, to tell a reused pid apart
    # The port chosen when the sandbox was made: every start takes it again when it is free
    # (`port` is the one of the current or last start). None in cluster.json files written
    # before it was kept: `port` is then the home port.
    home_port: int | None = None


def cluster_name(major: int) -> str:
    return f"pg{major}"


class Sandbox:
    """One sandbox cluster. Stateless apart from the files under `root`."""

    def __init__(self, root: Path, run_as: RunAs | None) -> None:
        self.root = root
        self.run_as = run_as

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "log" / "postgresql.log"

    @property
    def state_file(self) -> Path:
        return self.root / "cluster.json"

    # -- state ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.state_file.is_file() and (self.data_dir / "PG_VERSION").is_file()

    def state(self) -> ClusterState:
        try:
            return ClusterState(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise ClusterError(
                f"{self.state_file} is unreadable ({exc}); remove {self.root} or run "
                "`pgdyno sandbox destroy`."
            ) from exc

    def _save(self, state: ClusterState) -> None:
        # A temporary file of this process's own: a killed command's watchdog and the next
        # command's `recover` stop the sandbox and save its state at the same moment, and with
        # one shared name the second rename found the file gone (seen in the suite).
        tmp = self.state_file.with_name(f"{self.state_file.name}.{os.getpid()}.tmp")
        tmp.write_text(strict_json(asdict(state)) + "\n")
        tmp.replace(self.state_file)

    def binaries(self) -> Binaries:
        state = self.state()
        return Binaries(Path(state.bin_dir), state.version, "sandbox")

    def postmaster_pid(self) -> int | None:
        """The running postmaster of this data directory, checked against /proc."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().splitlines()[0]
            pid = int(first)
        except (OSError, ValueError, IndexError):
            return None
        if not process.pid_alive(pid):
            return None
        cmdline = process.pid_cmdline(pid)
        if cmdline and not any("postgres" in part or "postmaster" in part for part in cmdline):
            return None  # pid reused by an unrelated process
        return pid

    def status(self) -> Status:
        state = self.state()
        pid = self.postmaster_pid()
        return Status(
            state.name, state.version, pid is not None, pid, state.port, self.socket_dir,
            self.data_dir, state.owner_pid,
        )  # fmt: skip

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.state().port} user={SUPERUSER} dbname={dbname}"

    # -- lifecycle -----------------------------------------------------------------------------

    def init(self, binaries: Binaries, taken_ports: set[int]) -> None:
        """initdb a new cluster (as the sandbox user when pgdyno runs as root)."""
        if self.exists():
            raise ClusterError(f"a sandbox already exists in {self.root}.")
        shutil.rmtree(self.root, ignore_errors=True)  # leftovers of an interrupted init
        for path in (self.root, self.socket_dir, self.log_file.parent):
            path.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.socket_dir.chmod(0o750)
        hand_over(self.root, self.run_as)
        require_reachable(self.root, self.run_as, "work directory")
        require_reachable(binaries.bin_dir, self.run_as, "PostgreSQL binaries")
        os_user = self.run_as.name if self.run_as else _current_user()
        # initdb's own server processes map their shared memory under the default
        # huge_pages = try too: for a second or two they held free pages reserved for another
        # server, which then could not start with huge_pages = on. initdb -c exists from 16.
        quiet = ["-c", "huge_pages=off"] if binaries.major >= 16 else []
        try:
            process.run(
                [binaries.tool("initdb"), "-D", self.data_dir, "-U", SUPERUSER, "-E", "UTF8",
                 "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync",
                 "--no-instructions", *quiet],
                what="initdb", run_as=self.run_as, cwd=self.root, timeout=300,
            )  # fmt: skip
        except ProcessError as exc:
            shutil.rmtree(self.root, ignore_errors=True)
            raise ClusterError(f"initdb failed: {process.last_line(exc.stderr)}") from exc
        port = free_port(taken_ports, first_port(self.root))
        self._write_base_conf(port)
        (self.data_dir / "pg_hba.conf").write_text(HBA)
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# pgdyno: its own settings come last and win.\n"
                "include 'pgdyno.base.conf'\ninclude_if_exists 'pgdyno.settings.conf'\n"
            )
        self._write_settings({})
        hand_over(self.data_dir, self.run_as)
        state = ClusterState(
            self.root.name, binaries.version, str(binaries.bin_dir), port, os_user, home_port=port
        )
        self._save(state)

    def _write_base_conf(self, port: int) -> None:
        base = {
            "port": str(port),
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.socket_dir),
            "log_checkpoints": "on",
            "log_line_prefix": "%m [%p] ",
            "log_timezone": "UTC",
            "timezone": "UTC",
            # Huge pages only when a set or `tune --apply` asks for them (their settings come
            # later and win): under PostgreSQL's default `try` the sandbox took pages that an
            # administrator reserved for another server, which then could not start with
            # huge_pages = on.
            "huge_pages": "off",
        }
        path = self.data_dir / "pgdyno.base.conf"
        path.write_text(render_settings(base, "# Written by pgdyno; do not edit."))
        hand_over(path, self.run_as)

    def _write_settings(self, settings: Mapping[str, str]) -> None:
        path = self.data_dir / "pgdyno.settings.conf"
        path.write_text(render_settings(settings, "# The settings of pgdyno's current run."))
        hand_over(path, self.run_as)

    def start(
        self,
        settings: Mapping[str, str],
        *,
        owner_pid: int | None,
        binaries: Binaries | None = None,
        taken_ports: set[int] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        """Start with `settings`. `owner_pid`: the command that will stop it again (or None)."""
        state = self.state()
        if binaries is not None and str(binaries.bin_dir) != state.bin_dir:
            state = replace(state, bin_dir=str(binaries.bin_dir), version=binaries.version)
        if self.postmaster_pid() is not None:
            raise ClusterError(f"the sandbox {state.name} is already running.")
        state = self._port_for_start(state, taken_ports)
        self._write_settings(settings)
        started = process.start_time(owner_pid) if owner_pid else None
        self._save(replace(state, owner_pid=owner_pid, owner_started=started))
        if owner_pid == os.getpid():
            self._watch(owner_pid, started)
        tried = set(taken_ports) | {state.port}
        for attempt in range(1, PORT_TRIES + 1):
            log_offset = self._log_size()
            try:
                process.run(
                    [Path(state.bin_dir) / "pg_ctl", "start", "-D", self.data_dir, "-l",
                     self.log_file, "-w", "-t", "120", "-s"],
                    what="pg_ctl start", run_as=self.run_as, cwd=self.root, timeout=180,
                )  # fmt: skip
                return
            except ProcessError as exc:
                if attempt < PORT_TRIES and port_taken(self._log_since(log_offset)):
                    # Another server (another work directory's) took the port between the
                    # check above and this start: move to a free one and try again.
                    state = replace(state, port=free_port(tried, first_port(self.root)))
                    tried.add(state.port)
                    self._write_base_conf(state.port)
                    self._save(replace(state, owner_pid=owner_pid, owner_started=started))
                    continue
                self._save(replace(state, owner_pid=None, owner_started=None))
                self._unwatch()
                raise self._start_failure(log_offset, settings, state.version) from exc

    def _port_for_start(self, state: ClusterState, taken: set[int]) -> ClusterState:
        """The sandbox's own port when it is free; else, for this start only, a free one (the
        next start takes its own again)."""
        home = state.home_port or state.port
        port = home if port_is_free(home) else free_port(taken | {home}, first_port(self.root))
        self._write_base_conf(port)  # also brings a sandbox made by an older pgdyno up to date
        return replace(state, port=port, home_port=home)

    def _log_size(self) -> int:
        try:
            return self.log_file.stat().st_size
        except OSError:
            return 0

    def _log_since(self, offset: int) -> list[str]:
        try:
            with self.log_file.open("rb") as handle:
                handle.seek(offset)
                return handle.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            return []

    def _start_failure(
        self, log_offset: int, settings: Mapping[str, str], version: str
    ) -> ClusterError | UsageError:
        """Why the start failed, from this start's server log; a refused setting is named."""
        refused = refused_settings(self._log_since(log_offset))
        if not refused:
            return ClusterError(
                f"the sandbox PostgreSQL did not start: {self.last_log_error()}; "
                f"see {self.log_file}."
            )
        name, reason = refused[0]
        what = "its settings"
        if name is not None and name in settings:
            what = f"{name} = {quote_value(settings[name])}"
        elif name is not None:
            what = f"the setting {name}"
        return UsageError(
            f"PostgreSQL {version} refused {what} and did not start ({reason}): change or "
            f"remove that setting (server log: {self.log_file})."
        )

    def reload(self, settings: Mapping[str, str]) -> None:
        """Replace the run's settings and have the running postmaster re-read them.

        Only for settings that do not need a restart: the caller checks their context.
        """
        state = self.state()
        self._write_settings(settings)
        process.run(
            [Path(state.bin_dir) / "pg_ctl", "reload", "-D", self.data_dir, "-s"],
            what="pg_ctl reload", run_as=self.run_as, cwd=self.root, timeout=60,
        )  # fmt: skip

    def stop(self) -> bool:
        """Stop the postmaster (fast shutdown). Returns False when it was not running."""
        pid = self.postmaster_pid()
        if pid is None:
            self._clear_owner()
            return False
        state = self.state()
        try:
            process.run(
                [Path(state.bin_dir) / "pg_ctl", "stop", "-D", self.data_dir, "-m", "fast", "-w",
                 "-t", "120", "-s"],
                what="pg_ctl stop", run_as=self.run_as, cwd=self.root, timeout=180,
            )  # fmt: skip
        except ProcessError:
            _signal_and_wait(pid)  # binaries gone or pg_ctl stuck: SIGINT is a fast shutdown
        self._clear_owner()
        return True

    def _clear_owner(self) -> None:
        if self.state_file.is_file():
            self._save(replace(self.state(), owner_pid=None, owner_started=None))
        self._unwatch()

    def _watch(self, owner_pid: int, started: int | None) -> None:
        """Start the watchdog that stops this cluster if its owner dies without stopping it
        (a SIGKILL); without one, the next command's `recover` still does."""
        self._unwatch()
        with contextlib.suppress(OSError):
            _watchdogs[self.root] = process.start_guard(
                [sys.executable, "-m", "pgdyno.postgres.watchdog", self.root, str(owner_pid),
                 str(started) if started is not None else "-"]
            )  # fmt: skip

    def _unwatch(self) -> None:
        """Release the watchdog: the owner clears itself before this, so it exits at once."""
        guard = _watchdogs.pop(self.root, None)
        if guard is None:
            return
        if guard.stdin is not None:
            guard.stdin.close()
        try:
            guard.wait(timeout=30)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()

    def destroy(self) -> None:
        if self.exists():
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def last_log_error(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "no server log was written"
        for line in reversed(lines):
            if "FATAL" in line or "PANIC" in line or "ERROR" in line:
                return line.split("  ", 1)[-1].strip()
        return lines[-1].strip() if lines else "the server log is empty"


def _signal_and_wait(pid: int, timeout: float = 60) -> None:
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    if not process.wait_until(lambda: not process.pid_alive(pid), timeout):
        os.kill(pid, signal.SIGQUIT)


def _current_user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def all_sandboxes(clusters_dir: Path, run_as: RunAs | None) -> list[Sandbox]:
    if not clusters_dir.is_dir():
        return []
    return [
        Sandbox(path, run_as)
        for path in sorted(clusters_dir.iterdir())
        if (path / "cluster.json").is_file()
    ]


def taken_ports(clusters_dir: Path) -> set[int]:
    ports = set()
    for box in all_sandboxes(clusters_dir, None):
        try:
            ports.add(box.state().port)
        except ClusterError:
            continue
    return ports


def recover(clusters_dir: Path, run_as: RunAs | None) -> list[str]:
    """Stop postmasters that a pgdyno command started for itself and did not live to stop.

    Called at the start of every command that uses a sandbox; returns what it did, for the log.
    """
    notes = []
    for box in all_sandboxes(clusters_dir, run_as):
        try:
            state = box.state()
        except ClusterError:
            continue
        if state.owner_pid is None or process.same_process(state.owner_pid, state.owner_started):
            continue
        if box.stop():
            notes.append(
                f"stopped sandbox {state.name}, left running by an interrupted pgdyno "
                f"(pid {state.owner_pid})"
            )
    return notes


# -- The sandbox's TCP port on 127.0.0.1 ----------------------------------------------------------

FIRST_PORT = 54330
PORT_SPREAD = 1000  # new sandboxes start looking for a port this far apart (first_port)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_taken(log_lines: list[str]) -> bool:
    """True when a start failed because the TCP port was in use (PostgreSQL's own words).

    >>> port_taken(['2026-11-23 01:58:01 UTC [9] LOG:  could not bind IPv4 address '
    ...              '"127.0.0.1": Address already in use'])
    True
    >>> port_taken(['FATAL:  could not create lock file "postmaster.pid": Permission denied'])
    False
    """
    return any("Address already in use" in line for line in log_lines)


def first_port(root: Path) -> int:
    """Where the search for a new sandbox's port starts: a place of its own in the range for
    each sandbox directory, so that two work directories (two users) rarely want one port and
    take it from each other between commands.

    >>> here = Path("/var/lib/pgdyno/clusters/pg18")
    >>> first_port(here) == first_port(here)
    True
    >>> FIRST_PORT <= first_port(Path("/tmp/w/clusters/pg18")) < FIRST_PORT + PORT_SPREAD
    True
    """
    return FIRST_PORT + zlib.crc32(str(root).encode()) % PORT_SPREAD


def free_port(taken: set[int], first: int = FIRST_PORT) -> int:
    for port in range(first, first + 2000):
        if port not in taken and port_is_free(port):
            return port
    raise ClusterError(f"no free TCP port between {first} and {first + 1999} on 127.0.0.1.")
