"""`pgdyno compare --dsn`: a plan's sets applied to an existing server with ALTER SYSTEM, in
effect during their runs, and the server left exactly as found (issue 14 item 5).

The existing server is a sandbox this module starts, reached only through `--dsn` (with a
password that must never be printed), as the other --dsn tests do; the tests that change and
restart it also run on Debian's packaged cluster as a user has it (tests/debian_cluster.py).
Each test compares in a work directory of its own, so its results database and journal hold
only what it did.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    Cli,
    cli_in,
    one_clear_sentence,
    plain_role,
)
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.server import pending_changes

SECRET = "not-a-secret-compare-dsn"
# Scale 1, 3 s runs, one round, every transaction logged (no rate probe): a tiny real plan.
MATRIX = """
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = 3
repeats = 1
warmup = 0
latency_log = "full"
"""
TUNED = '[[set]]\nname = "base"\n[[set]]\nname = "tuned"\n[set.pg]\nwork_mem = "8MB"\njit = false\n'
BIG = '[[set]]\nname = "base"\n[[set]]\nname = "big"\n[set.pg]\nshared_buffers = "256MB"\n'
State = tuple[dict[str, tuple[str, str]], str]


@pytest.fixture(scope="module")
def dsn(server: Sandbox) -> str:
    return server.conninfo() + f" password={SECRET}"


@pytest.fixture
def cli(workdir: Path, cache_dir: Path) -> Cli:
    """`pgdyno ARGS...` in-process in this test's work directory; never shows the password."""
    return cli_in(workdir, cache_dir, secret=SECRET)


def write_plan(directory: Path, sets: str, name: str = "dsn") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(f'name = "{name}"\nbaseline = "base"\n{MATRIX}\n{sets}')
    return path


# What a start found rather than what was configured: with huge_pages = try, whether the kernel
# had huge pages free at the restart (other programs on the host reserve and release them).
FOUND_AT_START = {"huge_pages_status"}


def server_state(box: Any) -> State:
    """Every setting's value and source, and postgresql.auto.conf's text."""
    with connect(box.conninfo()) as client:
        rows = client.rows("SELECT name, setting, source FROM pg_settings")
    settings = {
        str(name): (str(setting), str(source))
        for name, setting, source in rows
        if name not in FOUND_AT_START
    }
    return settings, (box.data_dir / "postgresql.auto.conf").read_text()


def changes(before: State, after: State) -> dict[str, object]:
    """What differs between two states (empty when the server is as it was)."""
    (settings_a, auto_a), (settings_b, auto_b) = before, after
    found: dict[str, object] = {
        name: (settings_a.get(name), settings_b.get(name))
        for name in settings_a.keys() | settings_b.keys()
        if settings_a.get(name) != settings_b.get(name)
    }
    if auto_a != auto_b:
        found["postgresql.auto.conf"] = (auto_a, auto_b)
    return found


def stored(workdir: Path, query: str) -> list[tuple[Any, ...]]:
    path = workdir / "results.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        try:
            return db.execute(query).fetchall()
        except sqlite3.OperationalError:  # no schema yet: nothing was stored
            return []


def strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_sets_are_in_effect_during_their_runs_and_the_server_is_left_as_found(
    cli: Cli, existing: Any, workdir: Path
):
    server = existing
    dsn = server.conninfo()
    before = server_state(server)
    result = cli("compare", str(write_plan(workdir, TUNED)), "--dsn", dsn, "--json")
    assert result.code == 0, result.stderr
    done = strict(result.stdout)
    assert sorted((r["set_name"], r["status"]) for r in done["runs"]) == [
        ("base", "ok"),
        ("tuned", "ok"),
    ]
    effective = {s["name"]: s["effective"] for s in done["comparison"]["sets"]}
    assert effective["tuned"]["pg"] == {"jit": "off", "work_mem": "8MB"}
    assert effective["base"]["pg"] == {}
    assert effective["tuned"]["postgres"] == effective["base"]["postgres"]
    # What each run recorded as the server's non-default settings, read back from the file.
    runs = dict(stored(workdir, "SELECT set_name, settings FROM runs"))
    tuned, base = json.loads(runs["tuned"]), json.loads(runs["base"])
    assert tuned["work_mem"] == "8192 kB" and tuned["jit"] == "off"
    assert "work_mem" not in base and "jit" not in base
    assert changes(before, server_state(server)) == {}  # every ALTER SYSTEM undone, reloaded
    assert pending_changes(workdir) == []


def test_a_restart_setting_without_consent_is_refused_before_anything_runs(
    cli: Cli, dsn: str, server: Sandbox, workdir: Path
):
    before = server_state(server)
    plan = write_plan(workdir, BIG)
    for extra in ([], ["--yes"]):  # --yes alone names no way to restart
        result = cli("compare", str(plan), "--dsn", dsn, *extra)
        assert result.code == 2, result.stderr
        message = one_clear_sentence(result.stderr)
        assert "shared_buffers (set 'big') needs a restart of server " in message
        assert "add --yes with --restart-command CMD (or --data-dir DIR)" in message
    assert stored(workdir, "SELECT id FROM runs") == []
    assert changes(before, server_state(server)) == {} and pending_changes(workdir) == []


def test_a_set_on_another_version_is_refused(cli: Cli, dsn: str, server: Sandbox, workdir: Path):
    before = server_state(server)
    sets = TUNED.replace('name = "tuned"\n', 'name = "tuned"\npg_version = 16\n')
    result = cli("compare", str(write_plan(workdir, sets)), "--dsn", dsn)
    assert result.code == 2, result.stderr
    message = one_clear_sentence(result.stderr)
    assert "(set 'tuned', pg_version): set 'tuned' asks for PostgreSQL 16" in message
    assert "cannot change a server's version" in message
    assert changes(before, server_state(server)) == {}


@pytest.mark.exclusive("host")  # reads a sysctl that host tests change
def test_host_settings_are_refused_when_the_server_is_not_known_to_be_here(
    cli: Cli, server: Sandbox, workdir: Path
):
    """A role that may not read data_directory cannot show that the server runs here."""
    dsn = plain_role(server, "compare_remote", "CREATEDB") + f" password={SECRET}"
    expire = Path("/proc/sys/vm/dirty_expire_centisecs").read_text()
    sets = TUNED + '[set.sysctl]\n"vm.dirty_expire_centisecs" = 2900\n'
    result = cli("compare", str(write_plan(workdir, sets)), "--dsn", dsn)
    assert result.code == 2, result.stderr
    message = one_clear_sentence(result.stderr)
    assert "set 'tuned' changes host settings (vm.dirty_expire_centisecs)" in message
    assert "would change the wrong machine" in message
    assert Path("/proc/sys/vm/dirty_expire_centisecs").read_text() == expire


def test_consent_options_need_dsn(cli: Cli, workdir: Path):
    result = cli("compare", str(write_plan(workdir, TUNED)), "--yes")
    assert result.code == 2
    assert "go with --dsn" in one_clear_sentence(result.stderr)


def test_a_data_dir_of_another_cluster_is_refused(
    cli: Cli, dsn: str, server: Sandbox, workdir: Path, tmp_path: Path
):
    """pg_ctl must never restart a cluster other than the one --dsn reaches."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "PG_VERSION").write_text("18\n")
    plan = write_plan(workdir, BIG)
    result = cli("compare", str(plan), "--dsn", dsn, "--yes", "--data-dir", str(other))
    assert result.code == 2, result.stderr
    assert "is not the data directory of server " in one_clear_sentence(result.stderr)


@pytest.fixture(params=["sandbox", "debian"])
def existing(request: pytest.FixtureRequest, server: Sandbox) -> Any:
    """The sandbox reached by --dsn, and Debian's packaged cluster as a user has it (peer
    authentication, SSL through the ssl-cert group): the same tests run on both."""
    if request.param == "sandbox":
        return server
    return request.getfixturevalue("debian_server")


def test_a_restart_setting_restarts_with_pg_ctl_and_is_restored(
    cli: Cli, existing: Any, workdir: Path
):
    """With --yes and the data directory, pg_ctl (run as the directory's owner with its groups,
    the sandbox user or postgres) restarts the server for the set and again to restore it."""
    server = existing
    dsn = server.conninfo()
    before = server_state(server)
    first_pid = server.postmaster_pid()
    plan = write_plan(workdir, BIG)
    result = cli("compare", str(plan), "--dsn", dsn, "--yes", "--data-dir", str(server.data_dir),
                 "--json")  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.stderr.count("restarting server ") == 2  # to apply, then to restore
    effective = {s["name"]: s["effective"] for s in strict(result.stdout)["comparison"]["sets"]}
    assert effective["big"]["pg"] == {"shared_buffers": "256MB"}
    runs = dict(stored(workdir, "SELECT set_name, settings FROM runs"))
    assert json.loads(runs["big"])["shared_buffers"] == "32768 8kB"
    assert server.postmaster_pid() not in (None, first_pid)
    assert changes(before, server_state(server)) == {}
    assert pending_changes(workdir) == []
