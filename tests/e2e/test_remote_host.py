"""`--ssh`: a server on another host, reached over SSH (issue 22, item 5).

The other host is Debian's sshd on 127.0.0.1 in a UTS namespace of its own (tests/sshd.py): its
sessions see the hostname db-remote, so what pgdyno records of the remote host can be told
from this one. pgdyno runs as a real process whose HOME holds a ~/.ssh/config alias, the user key
and known_hosts, as a user has them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox
from pgdyno.remote.agent_client import Agent
from pgdyno.remote.host import remote_host
from tests.conftest import PGDYNO, new_workdir, one_clear_sentence, remove_workdir
from tests.sshd import ClientHome, SshServer

ALIAS = "db-remote-alias"
HOSTNAME = "db-remote"  # the ssh_server fixture's UTS hostname


def agent_dirs() -> set[str]:
    """The agent's temporary directories on the 'remote' host (this machine's /tmp)."""
    return {p.name for p in Path("/tmp").glob("pgdyno.*")}


@pytest.fixture(scope="module")
def home(ssh_server: SshServer) -> ClientHome:
    return ssh_server.client_home(ALIAS)


@pytest.fixture
def remote_workdir() -> Iterator[Path]:
    path = new_workdir()
    yield path
    remove_workdir(path)


def pgdyno(home: ClientHome, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home.home)}
    env.pop("SSH_AUTH_SOCK", None)  # only the key of the client home
    return subprocess.run(
        [str(PGDYNO), *args, "--workdir", str(workdir)], env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_bench_over_ssh_records_the_remote_side_and_leaves_nothing_there(
    home: ClientHome, server: Sandbox, binaries: Binaries, remote_workdir: Path
) -> None:
    before = agent_dirs()
    done = pgdyno(
        home, remote_workdir, "bench", "--ssh", ALIAS, "--dsn", server.conninfo(),
        "-w", "select-only", "-s", "1", "-c", "1", "-T", "4", "--driver", "remote",
        "--remote-pgbench", str(binaries.tool("pgbench")), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"pgbench runs on {ALIAS}" in done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "ok" and run["tps"] > 0
    # the remote host's identity, read by the agent over there
    assert run["host"]["hostname"] == HOSTNAME
    assert run["host"]["machine_id"] and run["host"]["kernel"]
    # the OS timeline came from the remote side, on this host's clock, beside the server's
    seconds = {row["t"] for row in run["seconds"]}
    os_seconds = {t for t, _ in run["samples"]["cpu.user_pct"]}
    assert len(os_seconds & seconds) >= len(seconds) - 1
    assert "pg.xact_commit_per_s" in run["samples"] or "pg.tps" in str(run["samples"].keys())
    # pgbench's own CPU, read on the host it ran on
    assert run["health"]["client_cpu_pct"] is not None
    assert run["samples"]["client.cpu_pct"]
    # the server's data directory was looked up on the remote host's copy of /proc and /sys
    assert run["devices"]["data"]["path"] == str(server.data_dir)
    assert agent_dirs() == before, "the agent left its temporary directory behind"


def test_the_local_driver_runs_pgbench_here_through_the_tunnel(
    home: ClientHome, server: Sandbox, remote_workdir: Path
) -> None:
    done = pgdyno(
        home, remote_workdir, "bench", "--ssh", ALIAS, "--dsn", server.conninfo(),
        "-w", "select-only", "-s", "1", "-c", "1", "-T", "3", "--driver", "local", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "ok" and run["host"]["hostname"] == HOSTNAME
    assert "127.0.0.1" in " ".join(run["pgbench_argv"])  # the forwarded port
    assert run["health"]["client_cpu_pct"] is not None  # this host's pgbench, read here


def test_doctor_over_ssh_audits_the_remote_host_and_its_server(
    home: ClientHome, server: Sandbox, remote_workdir: Path
) -> None:
    done = pgdyno(home, remote_workdir, "doctor", "--ssh", ALIAS, "--dsn", server.conninfo(),
                  "--json", "--fail-on", "never")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    facts = report["snapshot"] if "snapshot" in report else report
    text = json.dumps(facts)
    assert f'"hostname": "{HOSTNAME}"' in text
    assert str(server.data_dir) in text  # its devices were looked up on that host


def test_an_unknown_host_key_is_refused_in_one_sentence(
    ssh_server: SshServer, remote_workdir: Path
) -> None:
    stranger = ssh_server.client_home("unknown-host", known_host=False)
    done = pgdyno(stranger, remote_workdir, "doctor", "--ssh", "unknown-host")
    assert done.returncode == 3
    line = one_clear_sentence(done.stderr)
    assert "host key of unknown-host is not in known_hosts" in line
    assert stranger.known_hosts.read_text() == "", "the host key was accepted"


def test_a_configuration_without_host_key_checking_is_refused(
    ssh_server: SshServer, remote_workdir: Path
) -> None:
    careless = ssh_server.client_home("careless")
    careless.config.write_text(careless.config.read_text() + "    UserKnownHostsFile none\n")
    done = pgdyno(careless, remote_workdir, "doctor", "--ssh", "careless")
    assert done.returncode == 3
    assert "turns host key checking off" in one_clear_sentence(done.stderr)


def test_bench_over_ssh_needs_the_server_as_the_remote_sees_it(
    home: ClientHome, remote_workdir: Path
) -> None:
    done = pgdyno(home, remote_workdir, "bench", "--ssh", ALIAS, "-T", "3")
    assert done.returncode == 2
    assert "--ssh needs --dsn" in one_clear_sentence(done.stderr)


def test_the_clock_offset_is_measured_within_half_a_round_trip(
    home: ClientHome, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Both ends share this machine's clock: the true offset is 0, and the estimate must be
    within its stated error (half the round trip it was measured over)."""
    monkeypatch.setenv("HOME", str(home.home))
    with remote_host(ALIAS, tmp_path, lambda _: None) as remote:
        offset = remote.offset
        assert isinstance(remote.agent, Agent)
        assert abs(offset.offset_s) <= offset.round_trip_s / 2 + 0.001
        directory = remote.agent.directory
        assert Path(directory).is_dir()
    assert not Path(directory).exists()
    assert not any(tmp_path.iterdir()), "the local copy of the host's files was left"
