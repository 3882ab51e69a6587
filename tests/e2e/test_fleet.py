"""`pgdyno fleet`: one plan on two hosts at once, a third that cannot be reached (issue 22,
item 6). The hosts are two sshd on 127.0.0.1 in UTS namespaces of their own (db-a, db-b), each
with a sandbox PostgreSQL of its own as its server; the controller is a real pgdyno process
whose HOME holds the ssh_config aliases of both."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from conftest import (
    PGDYNO,
    new_workdir,
    one_clear_sentence,
    remove_workdir,
    sandbox_of_its_own,
    wait_for,
)
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import pid_alive, pid_cmdline
from remote_checks import CHANGED, PLAN, agent_dirs, interrupted, measuring, work_mem
from sshd import ClientHome, SshServer, free_port


@pytest.fixture(scope="module")
def hosts(cache_dir: Path, binaries: Binaries) -> Iterator[dict[str, tuple[SshServer, Sandbox]]]:
    with (
        SshServer("db-a") as a, SshServer("db-b") as b,
        sandbox_of_its_own(cache_dir, binaries) as box_a,
        sandbox_of_its_own(cache_dir, binaries) as box_b,
    ):  # fmt: skip
        yield {"db-a": (a, box_a), "db-b": (b, box_b)}


@pytest.fixture
def home(hosts: dict[str, tuple[SshServer, Sandbox]]) -> ClientHome:
    """One HOME reaching both hosts by alias, and a third alias where nothing listens."""
    (a, _), (b, _) = hosts.values()
    home = a.client_home("db-a")
    unreachable = f"Host db-gone\n    HostName 127.0.0.1\n    Port {free_port()}\n"
    home.config.write_text(
        home.config.read_text() + b.client_home("db-b").config.read_text() + unreachable
    )
    known = b.client_home("db-b").known_hosts.read_text()
    home.known_hosts.write_text(home.known_hosts.read_text() + known)
    return home


@pytest.fixture
def fleet_dir() -> Iterator[Path]:
    path = new_workdir()
    yield path
    remove_workdir(path)


def hosts_file(directory: Path, hosts: dict[str, tuple[SshServer, Sandbox]], gone: bool) -> Path:
    text = "".join(
        f'[[host]]\nname = "{name}"\nssh = "{name}"\ndsn = "{box.conninfo()}"\n'
        for name, (_, box) in hosts.items()
    )
    if gone:
        text += '[[host]]\nname = "db-gone"\nssh = "db-gone"\ndsn = "host=/tmp"\n'
    path = directory / "hosts.toml"
    path.write_text(text)
    return path


def run(home: ClientHome, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PGDYNO), *args], env={**os.environ, "HOME": str(home.home)},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_a_fleet_runs_on_every_host_and_names_the_one_that_failed(
    home: ClientHome, hosts: dict[str, tuple[SshServer, Sandbox]], fleet_dir: Path,
    pg_results: str,
) -> None:  # fmt: skip
    plan = fleet_dir / "plan.toml"
    plan.write_text(PLAN.format(duration=2))
    before = {name: work_mem(box) for name, (_, box) in hosts.items()}
    dirs = agent_dirs()
    done = run(home, "fleet", "run", str(plan), "--hosts", str(hosts_file(fleet_dir, hosts, True)),
               "--workdir", str(fleet_dir), "--results", pg_results)  # fmt: skip
    assert done.returncode == 1, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("pgdyno: error: ")]
    assert len(error) == 1 and "1 of 3 hosts did not finish: db-gone (cannot connect" in error[0]
    # progress per host (run ids are the shared store's: both hosts draw from one sequence)
    assert re.search(r"^\[db-a\] run \d+ \(2/2\)", done.stderr, re.M), done.stderr
    assert re.search(r"^\[db-b\] run \d+ \(2/2\)", done.stderr, re.M), done.stderr
    # every run of both hosts, in the shared store, each with its own host's identity
    listed = run(home, "runs", "list", "--json", "--results", pg_results, "--workdir",
                 str(fleet_dir))  # fmt: skip
    runs = json.loads(listed.stdout)
    assert sorted(r["host"] for r in runs) == ["db-a", "db-a", "db-b", "db-b"]
    assert all(r["status"] == "ok" for r in runs)
    assert {name: work_mem(box) for name, (_, box) in hosts.items()} == before
    assert agent_dirs() == dirs
    status = run(home, "fleet", "status", "--json", "--workdir", str(fleet_dir))
    shown = {h["name"]: h for h in json.loads(status.stdout)["hosts"]}
    assert {n: h["state"] for n, h in shown.items()} == {
        "db-a": "done",
        "db-b": "done",
        "db-gone": "failed",
    }
    assert [shown["db-a"]["runs_done"], shown["db-a"]["runs_planned"]] == [2, 2]
    assert "cannot connect to db-gone" in shown["db-gone"]["message"]


def test_ctrl_c_stops_every_host_and_restores_each_server(
    home: ClientHome, hosts: dict[str, tuple[SshServer, Sandbox]], fleet_dir: Path
) -> None:
    plan = fleet_dir / "plan.toml"
    plan.write_text(PLAN.format(duration=60))
    before = {name: work_mem(box) for name, (_, box) in hosts.items()}
    dirs = agent_dirs()
    args = ["fleet", "run", str(plan), "--hosts", str(hosts_file(fleet_dir, hosts, False)),
            "--workdir", str(fleet_dir)]  # fmt: skip

    def applied() -> bool:
        """the first set applied and its run under way on both hosts"""
        return measuring(box for _, box in hosts.values())

    def status_then_ctrl_c(pid: int) -> None:
        status = run(home, "fleet", "status", "--json", "--workdir", str(fleet_dir))
        shown = json.loads(status.stdout)
        assert shown["finished_at"] is None and not shown["controller_gone"]
        assert {h["state"] for h in shown["hosts"]} == {"running"}
        os.kill(pid, signal.SIGINT)

    done = interrupted(home, args, applied, status_then_ctrl_c)
    assert done.returncode == 130, done.stderr
    assert {name: work_mem(box) for name, (_, box) in hosts.items()} == before
    assert wait_for(lambda: agent_dirs() == dirs, 30), "an agent's directory was left"
    status = run(home, "fleet", "status", "--json", "--workdir", str(fleet_dir))
    assert {h["state"] for h in json.loads(status.stdout)["hosts"]} == {"interrupted"}
    listed = run(home, "runs", "list", "--json", "--workdir", str(fleet_dir))
    assert {r["status"] for r in json.loads(listed.stdout)} == {"interrupted"}
    assert sorted(r["host"] for r in json.loads(listed.stdout)) == ["db-a", "db-b"]


@pytest.fixture
def password_store(hosts: dict[str, tuple[SshServer, Sandbox]]) -> Iterator[tuple[str, Sandbox]]:
    """A results database on db-b's server that asks for a cleartext password (pg_hba method
    `password`) from its role `keeper`: a wrong password it receives is logged as an
    authentication failure. Its connection string has no password (the controller's passfile
    holds it). The server's pg_hba.conf is put back after."""
    _, box = hosts["db-b"]
    hba = box.data_dir / "pg_hba.conf"
    original = hba.read_text()
    with connect(box.conninfo()) as admin:
        admin.execute(sql.SQL("CREATE ROLE keeper LOGIN PASSWORD 'store-secret'"))
        admin.execute(sql.SQL("CREATE DATABASE fleet_store OWNER keeper"))
    hba.write_text("host all keeper 127.0.0.1/32 password\n" + original)
    reload(box)
    try:
        yield f"host=127.0.0.1 port={box.state().port} user=keeper dbname=fleet_store", box
    finally:
        hba.write_text(original)
        reload(box)
        with connect(box.conninfo()) as admin:
            admin.execute(sql.SQL("DROP DATABASE fleet_store WITH (FORCE)"))
            admin.execute(sql.SQL("DROP ROLE keeper"))


def reload(box: Sandbox) -> None:
    with connect(box.conninfo()) as admin:
        admin.rows("SELECT pg_reload_conf()")


def test_a_host_password_reaches_its_own_server_only(
    home: ClientHome, hosts: dict[str, tuple[SshServer, Sandbox]], fleet_dir: Path,
    password_store: tuple[str, Sandbox],
) -> None:  # fmt: skip
    """db-a's password (in its dsn) goes to db-a only: the results store, which has a password
    of its own (in the passfile), never receives it."""
    store_dsn, store_box = password_store
    passfile = fleet_dir / "pgpass"
    passfile.write_text(f"127.0.0.1:{store_box.state().port}:fleet_store:keeper:store-secret\n")
    passfile.chmod(0o600)
    _, box_a = hosts["db-a"]
    hosts_path = fleet_dir / "hosts.toml"
    hosts_path.write_text(
        f'[[host]]\nname = "db-a"\nssh = "db-a"\ndsn = "{box_a.conninfo()} password=db-a-secret"\n'
    )
    plan = fleet_dir / "plan.toml"
    plan.write_text(PLAN.format(duration=1))
    log_before = store_box.log_file.stat().st_size
    done = subprocess.run(
        [str(PGDYNO), "fleet", "run", str(plan), "--hosts", str(hosts_path), "--workdir",
         str(fleet_dir), "--results", store_dsn],
        env={**os.environ, "HOME": str(home.home), "PGPASSFILE": str(passfile)},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    with store_box.log_file.open() as log:
        log.seek(log_before)
        refused = [line for line in log if "password authentication failed" in line]
    assert refused == [], refused  # no connection to the store offered db-a's password
    assert done.returncode == 0, done.stderr
    assert "db-a-secret" not in done.stderr
    written = [p for p in fleet_dir.rglob("*") if p.is_file() and p != hosts_path]
    assert not [p for p in written if b"db-a-secret" in p.read_bytes()]
    with psycopg.connect(store_dsn, passfile=str(passfile)) as conn:
        hosts_stored = conn.execute(
            "SELECT DISTINCT s.host::json->>'hostname' FROM runs r JOIN sessions s"
            " ON s.id = r.session_id"
        ).fetchall()
    assert hosts_stored == [("db-a",)]


def fleet_children(fleet_dir: Path) -> list[int]:
    """pids of the `pgdyno compare` children whose work directory is under `fleet_dir`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if "compare" in cmd and any(c.startswith(str(fleet_dir)) for c in cmd):
                found.append(int(entry.name))
    return found


def status_written(fleet_dir: Path) -> bool:
    """the controller's status file (written once its stop handlers are set)"""
    return any((fleet_dir / "fleet").glob("*/status.json"))


@pytest.mark.parametrize("when", ["at-start", "mid-run"])
def test_repeated_sigterm_interrupts_every_host_and_keeps_their_runs(
    home: ClientHome, hosts: dict[str, tuple[SshServer, Sandbox]], fleet_dir: Path, when: str
) -> None:
    """SIGTERM after SIGTERM until the controller has ended (issue 31, item 7): exit 130, every
    host interrupted and restored, the status file finished and the runs imported. Before, the
    second signal could land anywhere in the controller's bookkeeping (exit 143, hosts
    "failed", once in about twelve tries a status file left "running")."""
    plan = fleet_dir / "plan.toml"
    plan.write_text(PLAN.format(duration=60))
    before = {name: work_mem(box) for name, (_, box) in hosts.items()}
    dirs = agent_dirs()
    args = ["fleet", "run", str(plan), "--hosts", str(hosts_file(fleet_dir, hosts, False)),
            "--workdir", str(fleet_dir)]  # fmt: skip

    def applied() -> bool:
        """the first set applied and its run under way on both hosts"""
        return measuring(box for _, box in hosts.values())

    def storm(pid: int) -> None:
        while pid_alive(pid):  # one more SIGTERM every tenth of a second until it has ended
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            time.sleep(0.1)

    until = applied if when == "mid-run" else (lambda: status_written(fleet_dir))
    done = interrupted(home, args, until, storm)
    assert done.returncode == 130, done.stderr
    assert one_clear_sentence(done.stderr).endswith("and the runs measured are stored.")
    status = json.loads(run(home, "fleet", "status", "--json", "--workdir", str(fleet_dir)).stdout)
    assert status["finished_at"] is not None
    assert {h["state"] for h in status["hosts"]} == {"interrupted"}, status
    assert {name: work_mem(box) for name, (_, box) in hosts.items()} == before
    assert fleet_children(fleet_dir) == []
    assert wait_for(lambda: agent_dirs() == dirs, 30), "an agent's directory was left"
    if when == "mid-run":  # each host's interrupted run, imported
        listed = run(home, "runs", "list", "--json", "--workdir", str(fleet_dir))
        assert sorted(r["host"] for r in json.loads(listed.stdout)) == ["db-a", "db-b"]


def test_a_plan_named_like_an_option_reaches_every_host(
    home: ClientHome, hosts: dict[str, tuple[SshServer, Sandbox]], fleet_dir: Path
) -> None:
    """`-dash.toml` given as ./-dash.toml: the children were given `-dash.toml`, an option."""
    (fleet_dir / "-dash.toml").write_text(PLAN.format(duration=1))
    done = subprocess.run(
        [str(PGDYNO), "fleet", "run", "./-dash.toml", "--hosts",
         str(hosts_file(fleet_dir, hosts, False)), "--workdir", str(fleet_dir)],
        env={**os.environ, "HOME": str(home.home)}, cwd=fleet_dir,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status = json.loads(run(home, "fleet", "status", "--json", "--workdir", str(fleet_dir)).stdout)
    assert {h["state"] for h in status["hosts"]} == {"done"}


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Directories a test makes immutable (chattr +i), made mutable again after it."""
    if shutil.which("chattr") is None:
        pytest.skip("needs e2fsprogs' chattr to make a directory immutable")
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_controller_that_fails_stops_every_host_first(
    home: ClientHome, hosts: dict[str, tuple[SshServer, Sandbox]], fleet_dir: Path,
    immutable: list[Path],
) -> None:  # fmt: skip
    """The status file cannot be written mid-run (its directory made immutable): one sentence,
    exit 3, and no child left running (before, a host named status.json left its child
    orphaned on IsADirectoryError)."""
    plan = fleet_dir / "plan.toml"
    plan.write_text(PLAN.format(duration=3))
    before = {name: work_mem(box) for name, (_, box) in hosts.items()}
    args = ["fleet", "run", str(plan), "--hosts", str(hosts_file(fleet_dir, hosts, False)),
            "--workdir", str(fleet_dir)]  # fmt: skip

    def applied() -> bool:
        """the first set applied on both hosts"""
        return all(work_mem(box) == CHANGED for _, box in hosts.values())

    def freeze(_pid: int) -> None:
        (directory,) = (fleet_dir / "fleet").iterdir()
        made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"this filesystem takes no immutable flag: {made.stderr.strip()}")
        immutable.append(directory)

    done = interrupted(home, args, applied, freeze)
    line = one_clear_sentence(done.stderr)
    assert done.returncode == 3, done.stderr
    assert "cannot write the fleet's status file in" in line and "no host is left running" in line
    assert fleet_children(fleet_dir) == []
    assert {name: work_mem(box) for name, (_, box) in hosts.items()} == before
