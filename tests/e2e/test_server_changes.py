"""Changing a server safely (issue 19): validated before a restart, never left down, a rollback
that finishes every job, one owner at a time.

The existing server is a real packaged one as a user has it: Debian's PostgreSQL cluster made
by the suite (peer authentication, SSL with the key readable through the `ssl-cert` group;
tests/debian_cluster.py). The sandbox reached by --dsn serves where a start must fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import IS_ROOT, Cli, make_env, new_workdir, one_clear_sentence, remove_workdir, run_in
from debian_cluster import ADMIN_PASSWORD, DebianCluster
from host_conditions import huge_page_pool
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.server import JOURNAL_NAME, contents
from plans import tiny_plan

needs_root = pytest.mark.skipif(not IS_ROOT, reason="restarts a server as its owner: needs root")


@pytest.fixture
def cli(cache_dir: Path) -> Cli:
    """`pgdyno ARGS` in-process; the password never shows."""
    return lambda workdir, *args: run_in(make_env(workdir, cache_dir), *args, secret=ADMIN_PASSWORD)


@pytest.fixture
def other_workdir() -> Iterator[Path]:
    path = new_workdir()
    yield path
    remove_workdir(path)


def state(dsn: str, data_dir: Path) -> dict[str, Any]:
    """Every setting's value, source and pending_restart, and postgresql.auto.conf's text."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting, source, pending_restart FROM pg_settings"
            " WHERE name <> 'huge_pages_status'"
        ).fetchall()
    return {
        "settings": {r[0]: r[1:] for r in rows},
        "auto_conf": (data_dir / "postgresql.auto.conf").read_text(),
    }


def diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    found = {n: (a["settings"].get(n), b["settings"].get(n))
             for n in a["settings"].keys() | b["settings"].keys()
             if a["settings"].get(n) != b["settings"].get(n)}  # fmt: skip
    if a["auto_conf"] != b["auto_conf"]:
        found["auto_conf"] = (a["auto_conf"], b["auto_conf"])
    return found


def pg_only(*args: str) -> tuple[str, ...]:
    return ("tune", "--apply", "--layers", "postgresql", "--profile", "oltp", *args)


@needs_root
def test_a_packaged_server_restarted_by_pg_ctl_comes_back_and_rolls_back_exactly(
    cli: Cli, workdir: Path, debian_server: DebianCluster
) -> None:
    """pg_ctl runs as the owner with its groups (the SSL key is readable through ssl-cert);
    no file is left in the data directory; a restart pending stays in the journal until a
    rollback with consent has made it."""
    server = debian_server
    dsn = server.peer_dsn("root")
    with huge_page_pool():  # restarted with the advice's huge_pages = try and shared_buffers
        restarted_and_rolled_back(cli, workdir, server, dsn)


def restarted_and_rolled_back(cli: Cli, workdir: Path, server: DebianCluster, dsn: str) -> None:
    before = state(dsn, server.data_dir)
    files = {p.name for p in server.data_dir.iterdir()}
    applied = cli(workdir, *pg_only("--dsn", dsn, "--data-dir", str(server.data_dir), "--yes"))
    assert applied.code == 0, applied.stderr
    assert "restarting" in applied.stderr
    after = state(dsn, server.data_dir)
    assert "shared_buffers" in diff(before, after)
    assert {p.name for p in server.data_dir.iterdir()} - files == set()

    plain = cli(workdir, "rollback")
    assert plain.code == 1
    sentence = one_clear_sentence(plain.stderr)
    assert "waits for a restart" in sentence and "shared_buffers" in sentence
    assert [c.name for c in contents(workdir).pending] != []  # kept until restarted
    refused = cli(workdir, *pg_only("--dsn", dsn))
    assert refused.code == 2 and "rollback" in one_clear_sentence(refused.stderr)

    finished = cli(workdir, "rollback", "--yes")
    assert finished.code == 0, finished.stderr
    assert diff(before, state(dsn, server.data_dir)) == {}
    assert server.is_running()
    again = cli(workdir, "rollback")
    assert again.code == 0 and "nothing to restore" in again.stdout


@needs_root
def test_rollback_takes_the_password_at_rollback_time_and_never_stores_it(
    cli: Cli, workdir: Path, debian_server: DebianCluster
) -> None:
    server = debian_server
    dsn = f"{server.password_dsn()} password={ADMIN_PASSWORD}"
    before = state(server.peer_dsn("root"), server.data_dir)
    applied = cli(workdir, *pg_only("--dsn", dsn))  # no --yes: nothing needing a restart
    assert applied.code == 0, applied.stderr
    assert "not applied, since they need a restart" in applied.stdout
    assert "shared_buffers" not in server.auto_conf()
    assert ADMIN_PASSWORD not in (workdir / JOURNAL_NAME).read_text()

    without = cli(workdir, "rollback")
    assert without.code != 0
    assert "password" in one_clear_sentence(without.stderr)
    wrong = cli(workdir, "rollback", "--dsn", server.peer_dsn("root"))
    assert wrong.code == 2 and "give one of those servers' connection strings" in wrong.stderr
    done = cli(workdir, "rollback", "--dsn", dsn)
    assert done.code == 0, done.stderr
    assert diff(before, state(server.peer_dsn("root"), server.data_dir)) == {}


@needs_root
def test_one_server_has_one_owner_across_work_directories(
    cli: Cli, workdir: Path, other_workdir: Path, debian_server: DebianCluster
) -> None:
    server = debian_server
    dsn = server.peer_dsn("root")
    assert cli(workdir, *pg_only("--dsn", dsn)).code == 0
    try:
        again = cli(other_workdir, *pg_only("--dsn", dsn))
        assert again.code == 2
        sentence = one_clear_sentence(again.stderr)
        assert "another pgdyno changed" in sentence and str(workdir) in sentence
        plan = other_workdir / "p.toml"
        plan.write_text(tiny_plan("p", warmup=None))
        compared = cli(other_workdir, "compare", str(plan), "--dsn", dsn)
        assert compared.code == 2 and "another pgdyno changed" in compared.stderr
        assert contents(other_workdir).pending == []
    finally:
        assert cli(workdir, "rollback").code == 0
    assert "pgdyno.changed_by" not in server.auto_conf()


def test_a_restart_command_that_does_not_exist_is_refused_before_anything(
    cli: Cli, workdir: Path, server: Sandbox
) -> None:
    before = state(server.conninfo(), server.data_dir)
    result = cli(workdir, *pg_only("--dsn", server.conninfo(), "--yes",
                                   "--restart-command", "/no/such/restart"))  # fmt: skip
    assert result.code == 2
    assert "not an executable program" in one_clear_sentence(result.stderr)
    assert diff(before, state(server.conninfo(), server.data_dir)) == {}
    assert contents(workdir).pending == []


def test_a_configuration_the_server_would_refuse_at_start_is_refused_first(
    cli: Cli, workdir: Path, server: Sandbox
) -> None:
    before = state(server.conninfo(), server.data_dir)
    result = cli(workdir, *pg_only("--dsn", server.conninfo(), "--connections", "1", "--yes",
                                   "--data-dir", str(server.data_dir)))  # fmt: skip
    assert result.code == 2
    sentence = one_clear_sentence(result.stderr)
    # Refused from the request (tune/request_checks.py) before the server is read; a value the
    # request allows but this server's reserved slots do not is preflight's (test_preflight.py).
    assert "--connections 1 is too few" in sentence
    assert diff(before, state(server.conninfo(), server.data_dir)) == {}
    assert server.postmaster_pid() is not None


@pytest.fixture
def strict_overcommit() -> Iterator[None]:
    """Heuristic overcommit (0): a shared memory segment far beyond RAM is refused at start."""
    if not IS_ROOT:
        pytest.skip("sets vm.overcommit_memory: needs root")
    path = Path("/proc/sys/vm/overcommit_memory")
    old = path.read_text().strip()
    path.write_text("0\n")
    try:
        yield
    finally:
        path.write_text(old + "\n")


@pytest.mark.exclusive("host")  # sets vm.overcommit_memory, which tune --apply sweeps change
def test_a_server_that_does_not_start_is_put_back_and_started_again(
    cli: Cli, workdir: Path, server: Sandbox, strict_overcommit: None
) -> None:
    before = state(server.conninfo(), server.data_dir)
    plan = workdir / "huge.toml"
    plan.write_text(tiny_plan("huge", [("base", {}), ("huge", {"shared_buffers": "4TB"})],
                              head={"baseline": "base"}, warmup=None))  # fmt: skip
    result = cli(workdir, "compare", str(plan), "--dsn", server.conninfo(), "--yes",
                 "--data-dir", str(server.data_dir))  # fmt: skip
    assert result.code == 2, result.stderr
    sentence = one_clear_sentence(result.stderr)
    assert "did not start with shared_buffers" in sentence
    assert "FATAL" in sentence and "put its previous settings back and started it again" in sentence
    assert server.postmaster_pid() is not None
    assert diff(before, state(server.conninfo(), server.data_dir)) == {}
    assert contents(workdir).pending == []


def test_rollback_of_a_work_directory_that_does_not_exist_says_so(cli: Cli, tmp_path: Path) -> None:
    result = cli(tmp_path / "nowhere", "rollback")
    assert result.code == 2
    assert "does not exist" in one_clear_sentence(result.stderr)
    assert not (tmp_path / "nowhere").exists()


def test_a_damaged_journal_restores_the_rest_and_waits_for_confirmation(
    cli: Cli, workdir: Path, server: Sandbox
) -> None:
    before = state(server.conninfo(), server.data_dir)
    assert cli(workdir, *pg_only("--dsn", server.conninfo())).code == 0
    journal = workdir / JOURNAL_NAME
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join([*lines[:2], "garbage in the middle\n", *lines[2:]]))
    rolled = cli(workdir, "rollback")
    assert rolled.code == 1
    sentence = one_clear_sentence(rolled.stderr)
    assert "line 3 of" in sentence and "--confirm-damaged" in sentence
    assert diff(before, state(server.conninfo(), server.data_dir)) == {}  # intact ones restored
    refused = cli(workdir, *pg_only("--dsn", server.conninfo()))
    assert refused.code == 2 and "damaged" in refused.stderr
    confirmed = cli(workdir, "rollback", "--confirm-damaged")
    assert confirmed.code == 0, confirmed.stderr
    assert "set the damaged journal aside" in confirmed.stdout
    assert not journal.exists() and list(workdir.glob(f"{JOURNAL_NAME}.damaged-*"))


def test_broken_configuration_files_are_refused_before_a_restart(
    cli: Cli, workdir: Path, server: Sandbox
) -> None:
    """A line PostgreSQL refuses is already in postgresql.conf: a restart would not come back,
    so nothing is changed and the line is named."""
    conf = server.data_dir / "postgresql.conf"
    original = conf.read_text()
    conf.write_text(original + "\ncommit_delay = 'banana'\n")
    try:
        before = state(server.conninfo(), server.data_dir)
        result = cli(workdir, *pg_only("--dsn", server.conninfo(), "--yes",
                                       "--data-dir", str(server.data_dir)))  # fmt: skip
        assert result.code == 2, result.stderr
        sentence = one_clear_sentence(result.stderr)
        assert (
            "already hold a line PostgreSQL would refuse" in sentence and "commit_delay" in sentence
        )
        assert diff(before, state(server.conninfo(), server.data_dir)) == {}
        assert contents(workdir).pending == []
    finally:
        conf.write_text(original)
