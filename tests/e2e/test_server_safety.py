"""One server, one benchmark at a time, and never a results store that a benchmark drops
(issue 31, item 5): the existing server is a sandbox reached only through --dsn."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import PGDYNO, new_workdir, one_clear_sentence, remove_workdir, wait_for
from pgdyno.postgres.client import compose, connect, identifier
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.postgres.server_lock import ServerLock
from pgdyno.results.postgres_db import PostgresDatabase
from pgdyno.results.store import ResultsStore
from remote_checks import PLAN

BENCH = ("bench", "-w", "select-only", "-s", "1", "-c", "1")


def sessions_in(dsn: str) -> int:
    with connect(dsn) as client:
        return int(client.rows("SELECT count(*) FROM sessions")[0][0])


def test_a_results_store_in_a_database_pgdyno_drops_is_refused_before_any_run(
    run_cli, workdir: Path, server: Sandbox
) -> None:
    """`--results` naming the bench copy on the server benchmarked: the dataset reset would
    drop it (DROP DATABASE ... WITH (FORCE)) with every run kept there."""
    store = server.conninfo(BENCH_DB)
    with connect(server.conninfo()) as admin:
        admin.execute(compose("DROP DATABASE IF EXISTS {} WITH (FORCE)", identifier(BENCH_DB)))
        admin.execute(compose("CREATE DATABASE {}", identifier(BENCH_DB)))
    try:
        db = PostgresDatabase(store)
        db.migrate()
        with ResultsStore(db) as kept:  # runs stored there before
            kept.begin_session(["pgdyno", "bench"], "a server", {}, {})
        done = run_cli(workdir, *BENCH, "-T", "1", "--dsn", server.conninfo(), "--results", store)
        assert done.code == 2, done.stderr
        sentence = one_clear_sentence(done.stderr)
        assert f"is {BENCH_DB}, a database pgdyno drops and re-creates" in sentence
        assert sessions_in(store) == 1  # what was stored is still there
    finally:
        with connect(server.conninfo()) as admin:
            admin.execute(compose("DROP DATABASE IF EXISTS {} WITH (FORCE)", identifier(BENCH_DB)))


def pgbench_running(server: Sandbox) -> bool:
    with connect(server.conninfo()) as client:
        rows = client.rows("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                           "'pgbench' AND state = 'active'")  # fmt: skip
    return int(rows[0][0]) > 0


def test_a_second_benchmark_of_one_server_is_refused_and_the_first_is_untouched(
    run_cli, workdir: Path, server: Sandbox
) -> None:
    """Two work directories, one server: the second bench is refused in one sentence while
    the first runs, and the first finishes with its dataset intact."""
    first_dir = new_workdir()
    try:
        first = subprocess.Popen(
            [str(PGDYNO), *BENCH, "-T", "8", "--dsn", server.conninfo(), "--workdir",
             str(first_dir), "--json"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert wait_for(lambda: pgbench_running(server), 180), "the first bench never ran"
            second = run_cli(workdir, *BENCH, "-T", "1", "--dsn", server.conninfo())
            out, err = first.communicate(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        assert second.code == 1, second.stderr
        sentence = one_clear_sentence(second.stderr)
        assert "another pgdyno is benchmarking server" in sentence
        assert "its lock is held by server process" in sentence and "wait for it" in sentence
        assert first.returncode == 0, err
        assert '"status": "ok"' in out
    finally:
        remove_workdir(first_dir)
    with connect(server.conninfo()) as client:  # the lock ended with the first bench
        assert client.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")[0][0] == 0


def test_the_lock_is_free_when_a_command_lets_go_of_it(server: Sandbox) -> None:
    """The next command on the server takes the lock at once: it was let go before the
    connection closed, not when the server process got round to ending (a compare that came
    right after another on one server was refused as "another pgdyno is benchmarking")."""
    with connect(server.conninfo()) as observer:
        for _ in range(20):
            lock = ServerLock(server.conninfo(), None, "server")
            lock.close()
            held = observer.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
            assert held[0][0] == 0


def test_a_hosts_file_naming_one_server_twice_is_refused(run_cli, workdir: Path) -> None:
    plan = workdir / "plan.toml"
    plan.write_text(PLAN.format(duration=1))
    hosts = workdir / "hosts.toml"
    hosts.write_text(
        '[[host]]\nname = "a"\nssh = "db-x"\ndsn = "host=/run/postgresql dbname=one"\n'
        '[[host]]\nname = "b"\nssh = "DB-X"\ndsn = "host=/run/postgresql port=5432 dbname=two"\n'
    )
    done = run_cli(workdir, "fleet", "run", str(plan), "--hosts", str(hosts))
    assert done.code == 2, done.stderr
    sentence = one_clear_sentence(done.stderr)
    assert "hosts 'a' and 'b' name the same server" in sentence and "list it once" in sentence
    assert not (workdir / "fleet").exists()  # refused before anything started
