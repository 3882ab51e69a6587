"""Real SSH servers for the tests: Debian's sshd on 127.0.0.1 with throwaway keys.

`SshServer(hostname)` starts `/usr/sbin/sshd` on a free port, in a directory of its own under
/run: its host key, the authorized key of a throwaway user key pair, its configuration, pid file
and log. With a hostname, sshd runs in a UTS namespace of its own, so the sessions it spawns see
that name in /proc/sys/kernel/hostname: two servers are two "hosts" (db-a, db-b) on one machine.

`server.client_home(alias)` writes a directory to use as HOME for an SSH client (pgdyno, asyncssh,
OpenSSH's ssh) with a ~/.ssh/config reaching the server as `alias`, the user key and a
known_hosts holding the server's host key; `known_host=False` gives one whose known_hosts is
empty, for the refusal of an unknown host key.

It logs in as the current user and needs root (/run/sshd, the UTS namespace), Debian's
openssh-server and util-linux's unshare and setpriv (`scripts/bootstrap dev` installs them);
without them it skips the test with the reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pytest

from pgdyno.process import pid_alive, wait_until

SSHD = Path("/usr/sbin/sshd")
# sshd's privilege separation directory (Debian's service makes it: a test run may be first).
PRIVSEP_DIR = Path("/run/sshd")
# With StrictModes, sshd reads authorized_keys only if no directory above it is group or world
# writable: not under /tmp (1777). /run is root's and 0755.
BASE_DIR = Path("/run")
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

# Our own file, not /etc/ssh/sshd_config: nothing of the machine's configuration applies (no
# Include, no AcceptEnv: no environment variable is passed from the client).
SSHD_CONFIG = """\
ListenAddress 127.0.0.1:{port}
HostKey {directory}/ssh_host_ed25519_key
PidFile {directory}/sshd.pid
AuthorizedKeysFile {directory}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes yes
PrintMotd no
Subsystem sftp internal-sftp
"""


def unavailable() -> str | None:
    """Why no SSH server can be started here, or None."""
    if not SSHD.is_file():
        return "needs Debian's openssh-server (/usr/sbin/sshd): run `scripts/bootstrap dev` as root"
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return "needs util-linux's unshare and setpriv"
    if os.geteuid() != 0:
        return "needs root to run sshd (privilege separation, UTS namespaces)"
    return None


def client_config(alias: str, port: int, user: str, ssh_dir: Path) -> str:
    """The ~/.ssh/config of a client home: `alias` is the server on 127.0.0.1:`port`.

    >>> print(client_config("db", 2222, "root", Path("/h/.ssh")), end="")
    Host db
        HostName 127.0.0.1
        Port 2222
        User root
        IdentityFile /h/.ssh/id_ed25519
        IdentitiesOnly yes
        UserKnownHostsFile /h/.ssh/known_hosts
    """
    return (
        f"Host {alias}\n"
        f"    HostName 127.0.0.1\n"
        f"    Port {port}\n"
        f"    User {user}\n"
        f"    IdentityFile {ssh_dir / 'id_ed25519'}\n"
        f"    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {ssh_dir / 'known_hosts'}\n"
    )


@dataclass(frozen=True)
class ClientHome:
    """A directory to use as HOME for an SSH client reaching a server as `alias`."""

    alias: str
    home: Path

    @property
    def config(self) -> Path:
        return self.home / ".ssh" / "config"

    @property
    def known_hosts(self) -> Path:
        return self.home / ".ssh" / "known_hosts"

    @property
    def identity(self) -> Path:
        return self.home / ".ssh" / "id_ed25519"


class SshServer:
    """A running sshd on 127.0.0.1:`port` (see the module's text); a context manager, or
    `start()` and `stop()`. Stopping ends every process it started, sessions included, and
    removes its directory."""

    def __init__(self, hostname: str | None = None) -> None:
        self.hostname = hostname
        self.directory: Path | None = None  # made by start(), removed by stop()
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    def _file(self, name: str) -> Path:
        assert self.directory is not None, "the server is not started"
        return self.directory / name

    @property
    def config(self) -> Path:
        return self._file("sshd_config")

    @property
    def log(self) -> Path:
        """sshd's own messages (-e): why a login was refused is here."""
        return self._file("sshd.log")

    @property
    def user_key(self) -> Path:
        """The private key authorized to log in (its public half is `user_key`.pub)."""
        return self._file("id_ed25519")

    @property
    def host_public_key(self) -> str:
        """`ssh-ed25519 AAAA...`, as a known_hosts line has it after the host."""
        return " ".join(self._file("ssh_host_ed25519_key.pub").read_text().split()[:2])

    def __enter__(self) -> SshServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start sshd and wait until it answers; skip the test if it cannot run here."""
        reason = unavailable()
        if reason is not None:
            pytest.skip(reason)
        refuse_locked_account()
        if not PRIVSEP_DIR.exists():
            PRIVSEP_DIR.mkdir()
            PRIVSEP_DIR.chmod(0o755)
        self.directory = Path(tempfile.mkdtemp(prefix="pgdyno-sshd-", dir=BASE_DIR))
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        keygen(self._file("ssh_host_ed25519_key"))
        keygen(self.user_key)
        write_private(self._file("authorized_keys"), public_half(self.user_key))
        self.port = free_port()
        self.config.write_text(SSHD_CONFIG.format(port=self.port, directory=self.directory))
        with self.log.open("wb") as log:
            process = subprocess.Popen(
                self._argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self._process = process
        up = wait_until(lambda: process.poll() is not None or answers(self.port), START_TIMEOUT_S)
        if not up or process.poll() is not None:
            log_text = self.log.read_text(errors="replace").strip()
            raise RuntimeError(
                f"sshd on 127.0.0.1:{self.port} did not start (exit status {process.poll()}):"
                f" {log_text}"
            )

    def _argv(self) -> list[str]:
        # sshd re-executes itself for each connection: it must be named by its absolute path.
        argv = [str(SSHD), "-D", "-e", "-f", str(self.config)]
        if self.hostname is not None:
            # unshare execs sh in a new UTS namespace; sh sets the name there and execs sshd.
            set_name = 'hostname "$1" && shift && exec "$@"'
            argv = ["unshare", "--uts", "sh", "-c", set_name, "sh", self.hostname, *argv]
        # Should the test process die without stopping it, the kernel kills sshd.
        return ["setpriv", "--pdeathsig", "KILL", *argv]

    def processes(self) -> list[int]:
        """The pids of sshd and of every process under it (connections, sessions)."""
        if self._process is None:
            return []
        return [self._process.pid, *descendants(self._process.pid)]

    def stop(self) -> None:
        """End sshd and everything under it (SIGTERM, then SIGKILL after STOP_TIMEOUT_S), then
        remove its directory."""
        pids = self.processes()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if wait_until(lambda: not any(pid_alive(pid) for pid in pids), STOP_TIMEOUT_S):
                break
        if self._process is not None:
            self._process.wait()
            self._process = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def client_home(self, alias: str, *, known_host: bool = True) -> ClientHome:
        """A HOME whose ~/.ssh/config reaches this server as `alias` with the user key; its
        known_hosts holds the host key as `[127.0.0.1]:port`, or nothing with known_host=False.
        Each call writes it again (one directory per alias and known_host)."""
        home = ClientHome(alias, self._file(f"home-{alias}{'' if known_host else '-unknown'}"))
        ssh_dir = home.config.parent
        ssh_dir.mkdir(parents=True, exist_ok=True)
        home.home.chmod(0o700)
        ssh_dir.chmod(0o700)
        shutil.copyfile(self.user_key, home.identity)
        home.identity.chmod(0o600)
        known = f"[127.0.0.1]:{self.port} {self.host_public_key}\n" if known_host else ""
        write_private(home.known_hosts, known)
        user = pwd.getpwuid(os.geteuid()).pw_name
        write_private(home.config, client_config(alias, self.port, user, ssh_dir))
        return home


def refuse_locked_account() -> None:
    """With UsePAM no, sshd refuses any login, keys included, to an account whose password is
    locked ('!' in /etc/shadow, as `passwd -l` leaves it): say so rather than fail later."""
    user = pwd.getpwuid(os.geteuid()).pw_name
    for line in Path("/etc/shadow").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name == user and rest.startswith("!"):
            raise RuntimeError(
                f"sshd (UsePAM no) refuses logins to {user}: its password is locked in "
                f"/etc/shadow ('!'); `usermod -p '*' {user}` allows key logins, no password"
            )


def keygen(path: Path) -> None:
    """A new ed25519 key pair without passphrase: `path` (0600) and `path`.pub."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        stdin=subprocess.DEVNULL, capture_output=True, check=True, timeout=30,
    )  # fmt: skip


def public_half(key: Path) -> str:
    return key.with_name(key.name + ".pub").read_text()


def write_private(path: Path, text: str) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def answers(port: int) -> bool:
    """Whether an SSH server answers on 127.0.0.1:`port` (it speaks first: its version)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
            return probe.recv(8).startswith(b"SSH-2.0-")
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """The pids of every process under `pid` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found
