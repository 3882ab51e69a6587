"""The sandbox cluster against real PostgreSQL binaries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import psycopg
import pytest

from conftest import IS_ROOT, make_env
from pgdyno.environment import Environment
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import ClusterState, Sandbox, recover, taken_ports
from pgdyno.postgres.sandbox_user import SANDBOX_USER, sandbox_user
from pgdyno.postgres.server import non_default_settings


def sandbox(workdir: Path, cache_dir: Path, binaries: Binaries) -> tuple[Environment, Sandbox]:
    env = make_env(workdir, cache_dir)
    return env, open_sandbox(env, binaries, lambda _msg: None)


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


def test_start_with_settings_then_stop(workdir: Path, cache_dir: Path, binaries: Binaries):
    _env, box = sandbox(workdir, cache_dir, binaries)
    box.start({"work_mem": "7MB", "shared_buffers": "64MB"}, owner_pid=None, binaries=binaries)
    pid = box.postmaster_pid()
    assert pid is not None
    if IS_ROOT:
        assert uid_of(pid) == sandbox_user(True).uid  # never runs as root
        assert sandbox_user(True).name == SANDBOX_USER
    else:  # a user's own sandbox runs as that user
        assert uid_of(pid) == os.geteuid() and sandbox_user(False) is None
    with connect(box.conninfo()) as client:
        assert client.rows("SHOW work_mem")[0][0] == "7MB"
        assert client.rows("SHOW shared_buffers")[0][0] == "64MB"
        assert client.rows("SHOW listen_addresses")[0][0] == "127.0.0.1"
        assert client.rows("SHOW log_checkpoints")[0][0] == "on"
        settings = non_default_settings(client)
        assert settings["work_mem"] == "7168 kB"
    # TCP is local-only and not trusted: without a password nobody gets in.
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(
            f"host=127.0.0.1 port={box.state().port} user=postgres dbname=postgres",
            connect_timeout=5,
        )
    assert box.stop() is True
    assert box.postmaster_pid() is None
    assert box.stop() is False


def test_settings_do_not_leak_into_the_next_start(workdir, cache_dir, binaries):
    _, box = sandbox(workdir, cache_dir, binaries)
    box.start({"work_mem": "9MB"}, owner_pid=None)
    box.stop()
    box.start({}, owner_pid=None)
    with connect(box.conninfo()) as client:
        assert client.rows("SHOW work_mem")[0][0] == "4MB"
    box.stop()


def test_postmaster_of_a_dead_pgdyno_is_found_and_stopped(workdir, cache_dir, binaries):
    _, box = sandbox(workdir, cache_dir, binaries)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    box.start({}, owner_pid=dead.pid)
    assert box.postmaster_pid() is not None
    notes = recover(workdir / "clusters", box.run_as)
    assert box.postmaster_pid() is None
    assert notes and f"pid {dead.pid}" in notes[0]


def test_a_live_owner_keeps_its_postmaster(workdir, cache_dir, binaries):
    _, box = sandbox(workdir, cache_dir, binaries)
    box.start({}, owner_pid=os.getpid())
    try:
        assert recover(workdir / "clusters", box.run_as) == []
        assert box.postmaster_pid() is not None
    finally:
        box.stop()


def test_taken_port_is_replaced(workdir, cache_dir, binaries):
    _, box = sandbox(workdir, cache_dir, binaries)
    port = box.state().port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        box.start({}, owner_pid=None, taken_ports=taken_ports(workdir / "clusters"))
        try:
            assert box.state().port != port
            with connect(box.conninfo()) as client:
                assert client.rows("SELECT 1")[0][0] == 1
        finally:
            box.stop()


def test_the_sandbox_goes_back_to_its_own_port_once_it_is_free(workdir, cache_dir, binaries):
    """Another server (another user's sandbox) on the port for one start moves the sandbox for
    that start only: the next start, the port free again, takes its own port again, so the
    port does not change between commands for good."""
    _, box = sandbox(workdir, cache_dir, binaries)
    home = box.state().port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", home))
        squatter.listen()
        box.start({}, owner_pid=None, taken_ports=taken_ports(workdir / "clusters"))
        moved = box.state().port
        box.stop()
    assert moved != home
    box.start({}, owner_pid=None, taken_ports=taken_ports(workdir / "clusters"))
    try:
        assert box.state().port == home
        with connect(box.conninfo()) as client:
            assert client.rows("SHOW port")[0][0] == str(home)
    finally:
        box.stop()


def test_destroy_removes_everything(workdir, cache_dir, binaries):
    _, box = sandbox(workdir, cache_dir, binaries)
    box.start({}, owner_pid=None)
    box.destroy()
    assert not box.root.exists()


def test_two_processes_stopping_one_sandbox_at_once_both_succeed(tmp_path: Path):
    """A killed command's watchdog and the next command's `recover` stop the sandbox at the
    same moment, and both save its state: each through a temporary file of its own (with one
    shared name, the second rename found the file gone and the command failed)."""
    root = tmp_path / "pg18"
    root.mkdir()
    owned = ClusterState("pg18", "18", "/nonexistent", 54330, "nobody", owner_pid=1)
    (root / "cluster.json").write_text(json.dumps(asdict(owned)))
    # No postmaster: stop() only clears the owner, which saves the state; 400 times each.
    code = (
        "import sys; from pathlib import Path; from pgdyno.postgres.cluster import Sandbox\n"
        "box = Sandbox(Path(sys.argv[1]), None)\n"
        "for _ in range(400): box.stop()\n"
    )
    stoppers = [
        subprocess.Popen([sys.executable, "-c", code, str(root)], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for stopper in stoppers:
        _, err = stopper.communicate(timeout=120)
        assert stopper.returncode == 0, err.decode()
    assert Sandbox(root, None).state().owner_pid is None
    assert [p.name for p in root.iterdir()] == ["cluster.json"]  # no temporary file left
