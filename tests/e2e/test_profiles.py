"""On-CPU profiles as a user meets them (issue 34 section 2): a bench with --cpu-profile on
an existing server (the module's sandbox, reached through --dsn), then `runs show --profile`
names functions of postgres per process type; without perf on the PATH one line says so and
the run goes on."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import make_env, run_in
from pgdyno.postgres.cluster import Sandbox

BENCH = ("bench", "-w", "select-only", "-s", "1", "-c", "2", "-T", "2", "--json")
pytestmark = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")


def test_profiled_bench_then_runs_show_profile(
    workdir: Path, cache_dir: Path, server: Sandbox
) -> None:
    env = make_env(workdir, cache_dir)
    done = run_in(env, *BENCH, "--cpu-profile", "--dsn", server.conninfo())
    assert done.code == 0, done.stderr
    assert "CPU profile not taken" not in done.stderr
    run_id = str(json.loads(done.stdout)[0]["id"])

    shown = run_in(env, "runs", "show", run_id, "--profile", "--json")
    assert shown.code == 0, shown.stderr
    found = json.loads(shown.stdout)
    profile = found["profile"]
    assert found["id"] == int(run_id) and profile["sample_hz"] == 99
    assert profile["samples"] > 0
    assert sum(profile["by_process"].values()) == pytest.approx(1.0)
    assert "client backend" in profile["by_process"]
    backend = {f["function"] for f in profile["top"] if f["process"] == "client backend"}
    # functions of the postgres binary, by name: which of them a 2 s run samples is chance, so
    # the class is checked (PostgreSQL's C functions are CamelCase or lower_case with
    # underscores; a kernel or libc function would be flagged `kernel` or named by file)
    named = {f["function"] for f in profile["top"] if not f["kernel"]}
    assert named - {n for n in named if n.startswith("[unknown]")}, profile["top"]
    assert backend, profile["top"]
    assert sum(profile["folded"].values()) + profile["folded_other"] == profile["samples"]

    table = run_in(env, "runs", "show", run_id, "--profile")
    assert table.code == 0, table.stderr
    assert f"run {run_id} CPU profile: perf cpu-clock at 99 Hz" in table.stdout
    assert "client backend: top functions (self)" in table.stdout
    # the whole run's JSON holds it too (strict JSON, `runs show --json`)
    whole = json.loads(run_in(env, "runs", "show", run_id, "--json").stdout)
    assert whole["profile"]["samples"] == profile["samples"]


def test_without_perf_one_line_says_so_and_the_run_goes_on(
    workdir: Path, cache_dir: Path, server: Sandbox, tmp_path: Path
) -> None:
    """A PATH without perf on it: the commands pgdyno needs are there, perf is not."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("setpriv", "sh"):  # what pgdyno's children are started through
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = make_env(workdir, cache_dir)
    env = replace(env, env={**env.env, "PATH": str(bin_dir)})
    done = run_in(env, *BENCH, "--cpu-profile", "--dsn", server.conninfo())
    assert done.code == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "CPU profile not taken" in line]
    assert len(said) == 1 and "perf is not installed" in said[0], done.stderr
    run_id = str(json.loads(done.stdout)[0]["id"])
    assert json.loads(run_in(env, "runs", "show", run_id, "--json").stdout)["profile"] is None
    refused = run_in(env, "runs", "show", run_id, "--profile")
    assert refused.code == 2 and "has no CPU profile" in refused.stderr
