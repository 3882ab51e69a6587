"""A remote host ready to benchmark or audit: the SSH connection, the agent in its temporary
directory, the clock offset, and a local copy of its /proc, /sys and /etc files.

`remote_host` opens all of it and, however the block ends (an error, Ctrl-C), stops the agent,
removes its directory on the host, closes the forwards and the connection and deletes the copy.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.host.disks import find_devices
from pgdyno.postgres.client import endpoint, with_endpoint
from pgdyno.records.devices import DeviceLayout
from pgdyno.remote.agent_client import Agent, ClockOffset
from pgdyno.remote.driver import RemoteDriver, find_pgbench
from pgdyno.remote.host_tree import copy_host
from pgdyno.remote.os_source import RemoteProc
from pgdyno.remote.ssh import Destination, SshSession

DRIVERS = ("auto", "remote", "local")


@dataclass
class RemoteHost:
    session: SshSession
    agent: Agent
    offset: ClockOffset
    proc_root: Path  # the local copy of its /proc
    sys_root: Path  # and of its /sys

    @property
    def name(self) -> str:
        return str(self.session.destination)

    def proc(self, devices: Sequence[str] | None) -> RemoteProc:
        """Its OS counters, once a second, for one run's timeline."""
        return RemoteProc(self.agent, self.offset, devices)

    def realpath(self, path: Path) -> Path | None:
        """`path` on the remote host with its symlinks followed; None when it cannot be seen
        there (absent, or hidden from the SSH user)."""
        found = self.agent.request("resolve", paths=[str(path)])["paths"][0]
        return None if found is None else Path(found)

    def locate_devices(self, data_dir: Path | None) -> DeviceLayout:
        """The devices under a data directory of the remote host and its pg_wal (as
        host/disks.py's locate_devices does here), read from the host's copy of /proc."""
        real = None if data_dir is None else self.realpath(data_dir)
        if data_dir is None or real is None:
            return DeviceLayout()
        devices, _unread = find_devices(real, self.realpath(data_dir / "pg_wal"),
                                        self.proc_root, self.sys_root)  # fmt: skip
        return devices

    def tunnel(self, dsn: str) -> str:
        """A connection string for this host that reaches the server `dsn` names as the remote
        host sees it, through a port forwarded over SSH."""
        host, port = endpoint(dsn)
        return with_endpoint(dsn, "127.0.0.1", self.session.forward(host, port))

    def driver(
        self, remote_dsn: str, server_major: int, choice: str, pgbench: str | None,
        log: Callable[[str], None],
    ) -> RemoteDriver | None:  # fmt: skip
        """pgbench on the remote host (None: run it here, through the tunnel). `choice` auto
        takes the remote one when the host has one."""
        if choice == "local":
            return None
        if pgbench is not None:
            ran = self.agent.request("run", argv=[pgbench, "--version"], timeout=30)
            if ran["code"] != 0:
                raise UsageError(f"--remote-pgbench {pgbench} does not run on {self.name} "
                                 f"({(ran['stderr'] or '').strip() or ran['code']}).")  # fmt: skip
            found: tuple[str, str] | None = (pgbench, ran["stdout"].split()[-1])
        else:
            found = find_pgbench(self.agent, server_major)
        if found is None:
            if choice == "remote":
                raise UsageError(f"{self.name} has no pgbench on its PATH or in the usual "
                                 "package directories: install it there, name it with "
                                 "--remote-pgbench, or use --driver local.")  # fmt: skip
            log(f"no pgbench on {self.name}: pgbench runs here, through the SSH tunnel")
            return None
        log(f"pgbench runs on {self.name} ({found[0]}, version {found[1]})")
        return RemoteDriver(self.agent, self.offset, remote_dsn, found[0], found[1])


@contextmanager
def remote_host(
    destination: str, scratch: Path, log: Callable[[str], None]
) -> Iterator[RemoteHost]:
    """Connect to `destination` ([user@]host, an ssh_config alias, ssh://...) for the block."""
    where = Destination.parse(destination)
    scratch.mkdir(parents=True, exist_ok=True)
    copy = Path(tempfile.mkdtemp(prefix="remote-", dir=scratch))
    session = SshSession(where)
    try:
        session.connect()
        agent = Agent.start(session)
        try:
            offset = agent.clock_offset()
            log(f"connected to {where}: clock offset {offset.offset_s * 1000:+.1f} ms "
                f"(round trip {offset.round_trip_s * 1000:.1f} ms)")  # fmt: skip
            proc_root, sys_root = copy_host(agent, copy)
            yield RemoteHost(session, agent, offset, proc_root, sys_root)
        finally:
            agent.close()
    finally:
        session.close()
        shutil.rmtree(copy, ignore_errors=True)
