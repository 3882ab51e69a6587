"""Interference on the live machine: the sandbox's postmaster found from a connection, and a
real bench run with a CPU hog beside it flagged in the results database."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_conditions import HOG_NAME, cpu_hog
from pgdyno.collect.interference import postmaster_of, server_pid
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox


def test_the_sandbox_postmaster_is_found_from_a_connection(box: Sandbox) -> None:
    with connect(box.conninfo()) as client:
        assert server_pid(client, box.conninfo(), Path("/proc")) == box.postmaster_pid()
        # Another host: the server's processes cannot be on this machine, nothing is read.
        assert server_pid(client, "host=db.example.com", Path("/proc")) is None
    assert postmaster_of(os.getpid(), Path("/proc")) is None  # not a PostgreSQL backend


@pytest.fixture
def hog() -> Iterator[int]:
    """Detached: the CLI runs in-process, so pytest's pid is pgdyno's own."""
    with cpu_hog(detached=True) as pid:
        yield pid


def bench_run(run_cli, workdir: Path) -> dict[str, object]:
    bench = run_cli(
        workdir, "bench", "--pg-version", "18", "-w", "select-only", "-c", "1", "-T", "3",
        "--json",
    )  # fmt: skip
    assert bench.code == 0, bench.stderr
    (run,) = json.loads(bench.stdout)
    shown = run_cli(workdir, "runs", "show", str(run["id"]), "--json")
    assert shown.code == 0, shown.stderr
    result: dict[str, object] = json.loads(shown.stdout)
    return result


def test_a_cpu_hog_beside_a_run_flags_it(run_cli, workdir: Path, hog: int) -> None:
    run = bench_run(run_cli, workdir)
    found = run["interference"]
    assert isinstance(found, dict), run["health"]
    assert list(found) == ["foreign_cpu_pct", "steal_pct", "top"]
    assert isinstance(found["foreign_cpu_pct"], float) and isinstance(found["steal_pct"], float)
    top = found["top"]
    assert isinstance(top, list) and 1 <= len(top) <= 5
    assert all(
        isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
        and isinstance(entry[1], float)
        for entry in top
    )  # fmt: skip
    hogs = [pct for command, pct in top if command == HOG_NAME]
    assert hogs and hogs[0] > 0 and found["foreign_cpu_pct"] >= hogs[0]
    health = run["health"]
    assert isinstance(health, dict)
    assert any(w.startswith("interference: ") and HOG_NAME in w for w in health["warnings"])


def test_a_run_without_the_hog_does_not_name_it(run_cli, workdir: Path) -> None:
    run = bench_run(run_cli, workdir)
    found = run["interference"]  # the host may be busy: flagged or not, the hog is not there
    assert found is None or HOG_NAME not in [command for command, _ in found["top"]]
