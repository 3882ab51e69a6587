"""Issue 22's acceptance, tried as a new user would: two work directories (the second on a host
of its own name, in a UTS namespace, and on PostgreSQL 16) bench into one PostgreSQL results
store; the runs list shows both sessions; an export imported into a fresh SQLite file holds the
same runs and importing it again adds nothing; reports by host and by version compare them and
name what differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from conftest import new_workdir, remove_workdir

BENCH = ("bench", "-w", "select-only", "-s", "1", "-c", "1", "-T", "3", "--json")
# The second "host": pgdyno in a UTS namespace of its own, named db-b (hostname is per UTS
# namespace, which is what /proc/sys/kernel/hostname and every host fact read).
IN_NAMESPACE = (
    "import runpy, socket, sys; socket.sethostname('db-b'); "
    "sys.argv = ['pgdyno', *sys.argv[1:]]; runpy.run_module('pgdyno', run_name='__main__')"
)


@pytest.fixture(scope="module")
def second_workdir() -> Iterator[Path]:
    path = new_workdir()
    yield path
    remove_workdir(path)


def as_db_b(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        pytest.skip("a UTS namespace of its own needs root (unshare --uts)")
    return subprocess.run(
        ["unshare", "--uts", sys.executable, "-c", IN_NAMESPACE, *args, "--workdir", str(workdir)],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip


def test_two_hosts_share_one_postgresql_store_and_are_compared(
    run_cli, shared_workdir: Path, second_workdir: Path, pg_results: str, tmp_path: Path
) -> None:
    # The writing commands get the store with a password (the sandbox does not ask for one):
    # it must reach neither the output nor anything stored, the sessions' commands included.
    secret = "Sesame-e2e-41"
    with_password = f"{pg_results} password={secret}"
    here = run_cli(shared_workdir, *BENCH, "--pg-version", "18", "--results", with_password)
    assert here.code == 0, here.stderr
    there = as_db_b(second_workdir, *BENCH, "--pg-version", "16", "--results", with_password)
    assert there.returncode == 0, there.stderr
    printed = here.stdout + here.stderr + there.stdout + there.stderr
    assert secret not in printed
    with psycopg.connect(pg_results) as conn:
        stored = conn.execute(
            "SELECT s::text FROM sessions s UNION ALL SELECT r::text FROM runs r"
        ).fetchall()
        commands = [c for (c,) in conn.execute("SELECT command FROM sessions").fetchall()]
    assert len(stored) == 4 and not any(secret in row for (row,) in stored)
    assert all("password=********" in c for c in commands), commands

    listed = run_cli(shared_workdir, "runs", "list", "--json", "--results", pg_results)
    runs = json.loads(listed.stdout)
    assert listed.code == 0 and len(runs) == 2
    assert len({r["session_id"] for r in runs}) == 2
    shown = [json.loads(run_cli(shared_workdir, "runs", "show", str(r["id"]), "--json",
                                "--results", pg_results).stdout) for r in runs]  # fmt: skip
    hosts = {s["host"]["hostname"] for s in shown}
    assert "db-b" in hosts and len(hosts) == 2
    assert all(s["host"]["machine_id"] and s["host"]["kernel"] for s in shown)
    assert all(s["host"]["os_release"] and s["host"]["cpu_model"] for s in shown)

    export = tmp_path / "both.pgdyno"
    exported = run_cli(shared_workdir, "runs", "export", str(export), "--results", pg_results)
    assert exported.code == 0, exported.stderr
    fresh = str(tmp_path / "fresh.sqlite")
    first = run_cli(shared_workdir, "runs", "import", str(export), "--results", fresh, "--json")
    again = run_cli(shared_workdir, "runs", "import", str(export), "--results", fresh, "--json")
    assert json.loads(first.stdout)["runs"] == 2 and json.loads(again.stdout)["runs"] == 0
    copied = json.loads(run_cli(shared_workdir, "runs", "list", "--json", "--results",
                                fresh).stdout)  # fmt: skip
    assert sorted(r["tps"] for r in copied) == sorted(r["tps"] for r in runs)

    for by, expected in (("host", {"db-b"}), ("pg_version", {"PostgreSQL 16.", "PostgreSQL 18."})):
        report = run_cli(shared_workdir, "report", "--all", "--by", by, "--json", "--results",
                         fresh, "-o", str(tmp_path / f"{by}.json"))  # fmt: skip
        assert report.code == 0, report.stderr
        built = json.loads((tmp_path / f"{by}.json").read_text())  # -o names the JSON's file
        names = [g["name"] for g in built["groups"]]
        assert len(names) == 2 and all(any(e in n for n in names) for e in expected), names
        assert built["grouped_by"] == by
        differs = {d["what"] for d in built["differences"]}
        assert "pgbench version" in differs, built["differences"]
        assert any(n.startswith("not the same in every group") for n in built["notes"])
        assert len(built["summary"]) == 2
        page = run_cli(shared_workdir, "report", "--all", "--by", by, "--results", fresh,
                       "-o", str(tmp_path / f"{by}.html"))  # fmt: skip
        assert page.code == 0 and (tmp_path / f"{by}.html").is_file(), page.stderr
