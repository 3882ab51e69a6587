"""`--ssh`: a server on another host, reached over SSH (issue 22, item 5).

The other host is Debian's sshd on 127.0.0.1 in a UTS namespace of its own (tests/sshd.py): its
sessions see the hostname db-remote, so what pgdyno records of the remote host can be told
from this one. pgdyno runs as a real process whose HOME holds a ~/.ssh/config alias, the user key
and known_hosts, as a user has them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PGDYNO, new_workdir, one_clear_sentence, remove_workdir, wait_for
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import pid_cmdline
from pgdyno.remote.host import remote_host
from remote_checks import CHANGED, PLAN, agent_dirs, interrupted, remote_pgbench, work_mem
from sshd import ClientHome, SshServer

ALIAS = "db-remote-alias"
HOSTNAME = "db-remote"  # the ssh_server fixture's UTS hostname


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
    os_seconds = {int(t) for t in run["samples"]["cpu.user_pct"]}
    assert len(os_seconds & seconds) >= len(seconds) - 1
    assert {"disk.vda.write_kbps", "mem.dirty_mb"} & set(run["samples"])
    assert run["samples"]["pg.xact_commit_per_s"]
    [offset] = [e for e in run["events"] if e["kind"] == "clock_offset"]
    assert offset["detail"]["host"] == ALIAS and "round_trip_ms" in offset["detail"]
    assert run["server"]["pgbench_host"] == ALIAS
    shown = pgdyno(home, remote_workdir, "runs", "show", str(run["id"]))
    assert f"clock of {ALIAS}" in shown.stdout and "corrected" in shown.stdout
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
    assert run["server"]["pgbench_host"] == "local"
    assert run["health"]["client_cpu_pct"] is not None  # this host's pgbench, read here


def test_doctor_over_ssh_audits_the_remote_host_and_its_server(
    home: ClientHome, server: Sandbox, remote_workdir: Path
) -> None:
    saved = remote_workdir / "snapshot.json"
    done = pgdyno(home, remote_workdir, "doctor", "--ssh", ALIAS, "--dsn", server.conninfo(),
                  "--json", "--fail-on", "never", "--snapshot", str(saved))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"].startswith(f"{ALIAS} server ")
    snapshot = json.loads(saved.read_text())
    assert snapshot["host"]["hostname"] == HOSTNAME
    assert snapshot["server"]["settings"]["data_directory"]["setting"] == str(server.data_dir)
    # its devices were looked up on that host (the copy of its mountinfo and sysfs)
    assert snapshot["devices"]["data"]["path"] == str(server.data_dir)
    assert snapshot["devices"]["data"]["fstype"]


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
    lines = careless.config.read_text().splitlines()
    careless.config.write_text("".join(
        "    UserKnownHostsFile none\n" if "UserKnownHostsFile" in line else line + "\n"
        for line in lines
    ))  # fmt: skip
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
        assert abs(offset.offset_s) <= offset.round_trip_s / 2 + 0.001
        directory = remote.agent.directory
        assert Path(directory).is_dir()
    assert not Path(directory).exists()
    assert not any(tmp_path.iterdir()), "the local copy of the host's files was left"


def bench_60s(server: Sandbox, pgbench: str, workdir: Path, clients: str = "1") -> list[str]:
    return [
        "bench", "--ssh", ALIAS, "--dsn", server.conninfo(), "-w", "select-only", "-s", "1",
        "-c", clients, "-T", "60", "--remote-pgbench", pgbench, "--workdir", str(workdir),
    ]  # fmt: skip


def stored_statuses(workdir: Path) -> list[str]:
    runs = subprocess.run(
        [str(PGDYNO), "runs", "list", "--json", "--workdir", str(workdir)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [r["status"] for r in json.loads(runs.stdout)]


def test_ctrl_c_stops_the_remote_pgbench_and_removes_the_agent(
    home: ClientHome, server: Sandbox, binaries: Binaries, remote_workdir: Path
) -> None:
    """SIGINT in the middle of a remote run: the remote pgbench is stopped, the agent's
    directory removed, the run kept as interrupted, exit status 130."""
    before, pgbench = agent_dirs(), str(binaries.tool("pgbench"))
    done = interrupted(
        home, bench_60s(server, pgbench, remote_workdir), lambda: remote_pgbench(pgbench),
        lambda pid: os.kill(pid, signal.SIGINT),
    )  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert wait_for(lambda: not remote_pgbench(pgbench), 10), "the remote pgbench was left"
    assert agent_dirs() == before
    assert stored_statuses(remote_workdir) == ["interrupted"]


def test_a_connection_lost_mid_run_stores_the_run_as_failed_and_leaves_nothing(
    home: ClientHome, ssh_server: SshServer, server: Sandbox, binaries: Binaries,
    remote_workdir: Path,
) -> None:  # fmt: skip
    """The SSH sessions are cut in the middle of a run (their sshd processes killed, as a
    network failure ends them): the run is stored as failed with the reason, the sweep stops in
    one sentence, and the agent, its input gone, stops pgbench and removes its directory."""
    before, pgbench = agent_dirs(), str(binaries.tool("pgbench"))

    def cut(_pid: int) -> None:
        sessions = [p for p in ssh_server.processes()[1:]
                    if (pid_cmdline(p) or [""])[0].startswith("sshd:")]  # fmt: skip
        assert sessions
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)

    done = interrupted(home, bench_60s(server, pgbench, remote_workdir, "1,2"),
                       lambda: remote_pgbench(pgbench), cut)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "the SSH connection to the server's host failed" in one_clear_sentence(done.stderr)
    assert wait_for(lambda: not remote_pgbench(pgbench), 30), "the remote pgbench was left"
    assert wait_for(lambda: agent_dirs() == before, 30), "the agent's directory was left"
    assert stored_statuses(remote_workdir) == ["failed"]


def test_compare_over_ssh_changes_the_server_and_restores_it(
    home: ClientHome, server: Sandbox, remote_workdir: Path
) -> None:
    plan = remote_workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=3))
    before = work_mem(server)
    done = pgdyno(home, remote_workdir, "compare", str(plan), "--ssh", ALIAS,
                  "--dsn", server.conninfo(), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert {r["set_name"] for r in runs} == {"base", "wm"}
    wm = next(r for r in runs if r["set_name"] == "wm")
    shown = pgdyno(home, remote_workdir, "runs", "show", str(wm["id"]), "--json")
    stored = json.loads(shown.stdout)
    assert stored["host"]["hostname"] == HOSTNAME
    assert stored["settings"].get("work_mem") == "7777 kB"
    assert work_mem(server) == before


def test_a_killed_compare_over_ssh_is_rolled_back_over_ssh(
    home: ClientHome, server: Sandbox, binaries: Binaries, remote_workdir: Path
) -> None:
    """SIGKILL while a set's setting is applied: the agent (its stdin closed) stops its
    pgbench and removes its directory; `pgdyno rollback` reaches the server again over SSH."""
    plan = remote_workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=60))
    before, dirs = work_mem(server), agent_dirs()
    args = ["compare", str(plan), "--ssh", ALIAS, "--dsn", server.conninfo(),
            "--workdir", str(remote_workdir)]  # fmt: skip
    interrupted(home, args, lambda: work_mem(server) == CHANGED,
                lambda pid: os.kill(pid, signal.SIGKILL))  # fmt: skip
    assert work_mem(server) == CHANGED  # left as the killed compare had it
    assert wait_for(lambda: agent_dirs() == dirs, 30), "the agent's directory was left"
    pgbench = str(binaries.tool("pgbench"))
    assert wait_for(lambda: not remote_pgbench(pgbench, "/usr/bin/pgbench"), 30)
    done = pgdyno(home, remote_workdir, "rollback")
    assert done.returncode == 0, done.stderr
    assert work_mem(server) == before
    assert agent_dirs() == dirs


def test_the_key_may_come_from_the_ssh_agent(
    ssh_server: SshServer, remote_workdir: Path, tmp_path: Path
) -> None:
    """No IdentityFile: the key is found in the agent SSH_AUTH_SOCK names, as ssh finds it;
    without the agent the same host refuses the login in one sentence."""
    home = ssh_server.client_home("by-agent")
    lines = home.config.read_text().splitlines(keepends=True)
    home.config.write_text("".join(line for line in lines if "Identit" not in line))
    key = tmp_path / "agent-key"
    key.write_bytes(home.identity.read_bytes())
    key.chmod(0o600)
    home.identity.unlink()  # only the agent holds it now
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert wait_for(socket_path.exists, 10)
        env = {**os.environ, "SSH_AUTH_SOCK": str(socket_path)}
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        with_agent = subprocess.run(
            [str(PGDYNO), "doctor", "--ssh", "by-agent", "--json", "--fail-on", "never",
             "--workdir", str(remote_workdir)],
            env={**env, "HOME": str(home.home)}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert with_agent.returncode == 0, with_agent.stderr
        assert json.loads(with_agent.stdout)["target"] == "by-agent"
    finally:
        agent.terminate()
        agent.wait()
    without = pgdyno(home, remote_workdir, "doctor", "--ssh", "by-agent")
    assert without.returncode == 3
    assert "by-agent refused the keys offered" in one_clear_sentence(without.stderr)


def test_a_frozen_ssh_server_is_named_with_a_reason(
    ssh_server: SshServer, home: ClientHome, remote_workdir: Path
) -> None:
    """sshd stopped (SIGSTOP): the connection is accepted by the kernel but nothing answers.
    The sentence said "over SSH ()" (issue 31, item 7); it now says what was waited for."""
    frozen = ssh_server.processes()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        done = pgdyno(home, remote_workdir, "doctor", "--ssh", ALIAS)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    line = one_clear_sentence(done.stderr)
    assert done.returncode == 3
    assert f"cannot connect to {ALIAS} over SSH (timed out after 20 s waiting for the SSH " in line
    assert "()" not in line
