"""One SSH connection to a remote host, for synchronous code (the one module that uses asyncssh).

asyncssh was chosen over driving OpenSSH's `ssh` binary because it gives port forwarding, SFTP
and many channels over one authenticated connection from Python, and it reads keys, the agent
(SSH_AUTH_SOCK), ~/.ssh/config (Host aliases, HostName, Port, User, IdentityFile, ProxyJump)
and known_hosts as OpenSSH does. A host key not in known_hosts is refused, never accepted,
and a configuration that turns checking off (`UserKnownHostsFile none`) is refused too.

The connection's event loop runs on a thread of its own; `call` runs a coroutine there and
waits for it, so the rest of pgdyno stays synchronous.
"""

from __future__ import annotations

import asyncio
import shlex
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pgdyno.errors import RemoteFailed, RemoteUnavailable, UsageError

# asyncssh (and the cryptography it loads) is imported where a connection is made, not here:
# every command imports this module, few of them open SSH connections.
if TYPE_CHECKING:
    import asyncssh

CONNECT_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Destination:
    """Where to connect, as `ssh` takes it: `[user@]host` (a ~/.ssh/config alias works) or
    `ssh://[user@]host[:port]`."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Destination:
        """
        >>> Destination.parse("bench@db1"), Destination.parse("ssh://db2:2222").port
        (Destination(host='db1', user='bench', port=None), 2222)
        """
        if text.startswith("ssh://"):
            parts = urlsplit(text)
            try:
                port = parts.port
            except ValueError:
                port = -1
            if not parts.hostname or port == -1 or parts.path not in ("", "/"):
                raise UsageError(f"--ssh {text!r} is not an ssh:// address: give "
                                 "ssh://[user@]host[:port] or [user@]host.")  # fmt: skip
            return cls(parts.hostname, parts.username, port)
        user, _, host = text.rpartition("@")
        if not host or any(c.isspace() for c in text) or text.startswith("-"):
            raise UsageError(f"--ssh {text!r} is not a host: give [user@]host, a Host alias of "
                             "~/.ssh/config, or ssh://[user@]host[:port].")  # fmt: skip
        return cls(host, user or None)

    def __str__(self) -> str:
        shown = f"{self.user}@{self.host}" if self.user else self.host
        return f"{shown}:{self.port}" if self.port else shown


@dataclass(frozen=True)
class Completed:
    code: int | None
    stdout: str
    stderr: str


class RemoteProcess:
    """A process on the remote host with pipes to it: lines in, lines out."""

    def __init__(self, session: SshSession, process: asyncssh.SSHClientProcess[str]) -> None:
        self._session = session
        self._process = process

    def write_line(self, line: str) -> None:
        async def write() -> None:
            self._process.stdin.write(line + "\n")
            await self._process.stdin.drain()

        self._session.call(write(), timeout=COMMAND_TIMEOUT_S)

    async def read_line(self) -> str:
        """The next line of its stdout ("" at its end); awaited on the connection's loop."""
        return await self._process.stdout.readline()

    def close(self, timeout_s: float = 15.0) -> int | None:
        """Close its stdin and wait for its exit; its exit status, None when it did not end."""

        async def finish() -> int | None:
            self._process.stdin.write_eof()
            try:
                await asyncio.wait_for(self._process.wait_closed(), timeout_s)
            except TimeoutError:
                self._process.kill()
                return None
            return self._process.exit_status

        try:
            return self._session.call(finish(), timeout=timeout_s + 5)
        except (RemoteFailed, RemoteUnavailable):
            return None

    def stderr(self) -> str:
        async def read() -> str:
            return await self._process.stderr.read()

        try:
            return self._session.call(read(), timeout=5)
        except (RemoteFailed, RemoteUnavailable):
            return ""


class SshSession:
    """An open SSH connection; `close()` (or the `with` block's end) ends it and its forwards."""

    def __init__(self, destination: Destination) -> None:
        self.destination = destination
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="pgdyno-ssh", daemon=True
        )
        self._thread.start()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._listeners: list[asyncssh.SSHListener] = []

    # -- the loop ------------------------------------------------------------------------

    def call[T](self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coroutine` on the connection's loop; its result, or one sentence on failure."""
        import asyncssh

        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise RemoteFailed(f"{self.destination} did not answer within {timeout:.0f} s; "
                               "check the connection and run again.") from None  # fmt: skip
        except (asyncssh.DisconnectError, asyncssh.ChannelOpenError, ConnectionError) as exc:
            raise RemoteUnavailable(
                f"the SSH connection to {self.destination} was lost ({_reason(exc)}); check the "
                "host and run again."
            ) from None

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Start `coroutine` on the loop without waiting for it (a reader of a stream)."""
        asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    # -- connecting ----------------------------------------------------------------------

    def connect(self) -> SshSession:
        self.call(self._connect(), timeout=CONNECT_TIMEOUT_S + 5)
        return self

    async def _connect(self) -> None:
        import asyncssh

        d = self.destination
        try:
            options = asyncssh.SSHClientConnectionOptions(
                host=d.host, port=d.port or (), username=d.user or (), config=user_config(),
                connect_timeout=CONNECT_TIMEOUT_S, keepalive_interval=15,
            )  # fmt: skip
        except (asyncssh.ConfigParseError, ValueError, OSError) as exc:
            raise RemoteUnavailable(
                f"the SSH configuration for {d} could not be read ({exc}); fix ~/.ssh/config "
                "and run again."
            ) from None
        if options.known_hosts is None:
            raise RemoteUnavailable(
                f"the SSH configuration for {d} turns host key checking off (UserKnownHostsFile "
                "none); pgdyno checks host keys against known_hosts: remove that line."
            )
        try:
            self._conn = await asyncssh.connect(d.host, options=options)
        except asyncssh.HostKeyNotVerifiable:
            raise RemoteUnavailable(
                f"the host key of {d} is not in known_hosts (or differs from it): check it "
                f"and accept it with `ssh {d}` once, then run again."
            ) from None
        except asyncssh.PermissionDenied:
            raise RemoteUnavailable(
                f"{d} refused the keys offered (agent, IdentityFile, ~/.ssh/id_*): check that "
                f"`ssh {d}` logs in without a password, then run again."
            ) from None
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise RemoteUnavailable(
                f"cannot connect to {d} over SSH ({_reason(exc, CONNECT_TIMEOUT_S)}); check the "
                "host name, port and network, then run again."
            ) from None

    @property
    def conn(self) -> asyncssh.SSHClientConnection:
        if self._conn is None:
            raise RuntimeError("SshSession used before connect()")
        return self._conn

    # -- what runs there -----------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> Completed:
        """Run a command (quoted for the remote shell; no shell here) and collect its output."""

        async def run() -> Completed:
            done = await self.conn.run(shlex.join(argv), check=False, timeout=timeout_s)
            out, err = (v if isinstance(v, str) else "" for v in (done.stdout, done.stderr))
            return Completed(done.exit_status, out, err)

        return self.call(run(), timeout=timeout_s + 5)

    def start(self, argv: Sequence[str]) -> RemoteProcess:
        async def start() -> asyncssh.SSHClientProcess[str]:
            return await self.conn.create_process(shlex.join(argv))

        return RemoteProcess(self, self.call(start(), timeout=COMMAND_TIMEOUT_S))

    def put(self, local: Path, remote: str) -> None:
        async def put() -> None:
            async with self.conn.start_sftp_client() as sftp:
                await sftp.put(str(local), remote)

        self._sftp(put(), f"copy {local.name} to {remote}")

    def get(self, remote: str, local: Path) -> None:
        async def get() -> None:
            async with self.conn.start_sftp_client() as sftp:
                await sftp.get(remote, str(local))

        self._sftp(get(), f"fetch {remote}")

    def _sftp(self, coroutine: Coroutine[Any, Any, None], what: str) -> None:
        import asyncssh

        try:
            self.call(coroutine, timeout=600)
        except (asyncssh.SFTPError, OSError) as exc:
            raise RemoteFailed(f"could not {what} on {self.destination} over SFTP "
                               f"({_reason(exc)}).") from None  # fmt: skip

    def forward(self, host: str, port: int) -> int:
        """A local port on 127.0.0.1 forwarded to `host:port` as the remote host sees it, or
        to the Unix socket `host` when it is a path; the local port."""

        async def forward() -> int:
            if host.startswith("/"):
                listener = await self.conn.forward_local_port_to_path("127.0.0.1", 0, host)
            else:
                listener = await self.conn.forward_local_port("127.0.0.1", 0, host, port)
            self._listeners.append(listener)
            return listener.get_port()

        return self.call(forward(), timeout=COMMAND_TIMEOUT_S)

    def close(self) -> None:
        async def close() -> None:
            for listener in self._listeners:
                listener.close()
            if self._conn is not None:
                self._conn.close()
                await self._conn.wait_closed()

        try:
            self.call(close(), timeout=15)
        except (RemoteFailed, RemoteUnavailable):
            pass
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> SshSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def user_config() -> list[str]:
    """~/.ssh/config when there is one, as ssh reads it. Named here rather than left to
    asyncssh's default, so that the options checked (known_hosts) are those used."""
    path = Path("~/.ssh/config").expanduser()
    return [str(path)] if path.is_file() else []


def _reason(exc: BaseException, waited_s: float | None = None) -> str:
    """What went wrong, in words, never empty: a timeout's own text is empty (`TimeoutError()`),
    as when the SSH server accepts the connection but never answers (stopped, overloaded);
    `waited_s` is how long was waited for it.

    >>> _reason(TimeoutError(), 20), _reason(OSError(111, "Connection refused"))
    ("timed out after 20 s waiting for the SSH server's answer", '[Errno 111] Connection refused')
    """
    text = str(getattr(exc, "reason", "") or exc).strip().rstrip(".")
    if text:
        return text
    if isinstance(exc, TimeoutError) and waited_s is not None:
        return f"timed out after {waited_s:.0f} s waiting for the SSH server's answer"
    return type(exc).__name__
