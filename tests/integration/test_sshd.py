"""The SSH servers of the tests (tests/sshd.py) are real: OpenSSH's sshd, reached with asyncssh
and with OpenSSH's own client through the ~/.ssh/config of a client home, each server a "host"
with a hostname of its own, and nothing of it left once stopped."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from pathlib import Path

import asyncssh
import pytest

from pgdyno.process import pid_alive, pid_cmdline
from sshd import ClientHome, SshServer, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")


async def run_remote(home: ClientHome, command: str) -> str:
    async with asyncssh.connect(home.alias, config=[home.config]) as conn:
        result = await conn.run(command, check=True, timeout=20)
    return str(result.stdout)


def remote_hostname(home: ClientHome) -> str:
    return asyncio.run(run_remote(home, "cat /proc/sys/kernel/hostname")).strip()


def openssh(home: ClientHome, command: str) -> subprocess.CompletedProcess[str]:
    argv = ["ssh", "-F", str(home.config), "-o", "BatchMode=yes", home.alias, command]
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30
    )


def processes_naming(directory: Path) -> list[int]:
    """pids whose command line names `directory` (sshd's shows its -f config file)."""
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    return [pid for pid in pids if any(str(directory) in arg for arg in pid_cmdline(pid))]


def test_asyncssh_reaches_the_host_through_the_client_config(ssh_server: SshServer):
    home = ssh_server.client_home("db")
    assert remote_hostname(home) == "db-remote"
    assert socket.gethostname() != "db-remote", "only sshd's sessions see the name"
    assert asyncio.run(run_remote(home, "id -un")).strip() == "root"


def test_the_client_home_has_the_modes_openssh_wants(ssh_server: SshServer):
    home = ssh_server.client_home("db")
    assert home.config.parent.stat().st_mode & 0o777 == 0o700
    for path in (home.config, home.identity, home.known_hosts):
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert home.known_hosts.read_text().startswith(f"[127.0.0.1]:{ssh_server.port} ssh-ed25519 ")


def test_an_unknown_host_key_is_refused(ssh_server: SshServer):
    home = ssh_server.client_home("db", known_host=False)
    assert home.known_hosts.read_text() == ""
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        remote_hostname(home)
    refused = openssh(home, "true")
    assert refused.returncode == 255
    assert "Host key verification failed" in refused.stderr


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's client (ssh)")
def test_openssh_reaches_the_host_through_the_same_config(ssh_server: SshServer):
    home = ssh_server.client_home("db")
    done = openssh(home, "cat /proc/sys/kernel/hostname")
    assert (done.returncode, done.stdout, done.stderr) == (0, "db-remote\n", "")
    assert openssh(home, "true").returncode == 0


def test_two_hosts_at_once_and_nothing_left_once_stopped():
    with SshServer("db-a") as db_a, SshServer("db-b") as db_b:
        assert db_a.port != db_b.port
        assert remote_hostname(db_a.client_home("a")) == "db-a"
        assert remote_hostname(db_b.client_home("b")) == "db-b"
        directory = db_a.directory
        assert directory is not None and processes_naming(directory)

        async def stop_during_a_session() -> list[int]:
            home = db_a.client_home("a")
            async with asyncssh.connect(home.alias, config=[home.config]) as conn:
                await conn.create_process("sleep 600")
                await asyncio.sleep(0.5)  # the session has started its shell
                pids = db_a.processes()
                db_a.stop()
                return pids

        pids = asyncio.run(stop_during_a_session())
        assert len(pids) >= 3, "sshd, the connection's sshd, the session's sleep"
        assert not [pid for pid in pids if pid_alive(pid)]
        assert processes_naming(directory) == []
        assert not directory.exists()
        assert remote_hostname(db_b.client_home("b")) == "db-b", "the other host still runs"
