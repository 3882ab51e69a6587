"""On-CPU profiles as a user meets them (issue 34 section 2): a bench of two runs, profiled
by default, on an existing server (the module's sandbox, reached through --dsn); `runs show
--profile` names functions of postgres per process type; the report draws a flame graph per
run and, against a second session with prepared statements, a differential flame graph, in a
real headless Chromium; without perf on the PATH one line says so and the run goes on.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from tests.browser import chromium

from conftest import ARTIFACTS, make_env, new_workdir, remove_workdir, run_in
from pgdyno.environment import CPU_PROFILE_ENV, Environment
from pgdyno.host.perf import DEFAULT_HZ
from pgdyno.postgres.cluster import Sandbox

BENCH = ("bench", "-w", "select-only", "-s", "1", "-c", "2", "-T", "2", "--json")
UNFLAGGED = ("--foreign-cpu-limit", "100")
pytestmark = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")


@pytest.fixture(scope="module")
def profiled(cache_dir: Path, server: Sandbox) -> Iterator[tuple[Environment, list[int]]]:
    """Two profiled runs of one bench session, then one of a second session with prepared
    statements, in a work directory of the module's."""
    workdir = new_workdir()
    # The profile's default as a user has it (the suite turns it off: tests/conftest.py).
    plain = {k: v for k, v in os.environ.items() if k != CPU_PROFILE_ENV}
    env = replace(make_env(workdir, cache_dir), env=plain)
    # Beside the suite's other tests a run may be flagged for foreign CPU, and the report's
    # differential graph leaves flagged runs out, as the verdicts do: none is flagged here.
    done = run_in(env, *BENCH, "--repeats", "2", *UNFLAGGED, "--dsn", server.conninfo())
    assert done.code == 0, done.stderr
    assert "CPU profile" not in done.stderr, done.stderr
    runs = json.loads(done.stdout)
    assert [r["status"] for r in runs] == ["ok", "ok"], runs
    assert all(r["profile"] is not None for r in runs), runs
    done = run_in(env, *BENCH, "-M", "prepared", "--cpu-profile", *UNFLAGGED, "--dsn",
                  server.conninfo())  # fmt: skip
    assert done.code == 0, done.stderr
    (prepared,) = json.loads(done.stdout)
    assert prepared["status"] == "ok" and prepared["profile"] is not None, prepared
    yield env, [r["id"] for r in runs] + [prepared["id"]]
    remove_workdir(workdir)


def test_runs_show_profile_names_postgres_functions(
    profiled: tuple[Environment, list[int]],
) -> None:
    env, (run_id, *_) = profiled
    shown = run_in(env, "runs", "show", str(run_id), "--profile", "--json")
    assert shown.code == 0, shown.stderr
    found = json.loads(shown.stdout)
    profile = found["profile"]
    assert found["id"] == run_id and profile["sample_hz"] == DEFAULT_HZ and profile["samples"] > 0
    assert sum(profile["by_process"].values()) == pytest.approx(1.0)
    assert "client backend" in profile["by_process"]
    # Which functions a 2 s run samples is chance, so a class of names is checked: user-space
    # functions named by their symbol (a binary without symbols gives `[unknown] postgres`).
    named = {
        f["function"] for f in profile["top"]
        if f["process"] == "client backend" and not f["kernel"]
        and not f["function"].startswith("[unknown]")
    }  # fmt: skip
    assert named, profile["top"]
    assert sum(profile["folded"].values()) + profile["folded_other"] == profile["samples"]

    table = run_in(env, "runs", "show", str(run_id), "--profile")
    assert table.code == 0, table.stderr
    assert f"run {run_id} CPU profile: perf cpu-clock at {DEFAULT_HZ} Hz" in table.stdout
    assert "client backend: top functions (self)" in table.stdout
    whole = json.loads(run_in(env, "runs", "show", str(run_id), "--json").stdout)
    assert whole["profile"]["samples"] == profile["samples"]  # the whole run's JSON holds it


def test_report_draws_a_flame_graph_per_run_and_a_differential_one(
    profiled: tuple[Environment, list[int]], tmp_path: Path
) -> None:
    env, run_ids = profiled
    data = tmp_path / "r.json"
    done = run_in(env, "report", *map(str, run_ids), "-o", str(data), "--json")
    assert done.code == 0, done.stderr
    report = json.loads(data.read_text())
    assert "cpu_changes" in report  # [] when no function moved beyond sampling error
    assert all(r["profile"]["top"] for r in report["runs"])
    flagged = [r["interference"] for r in report["runs"] if r["interference"]]
    if flagged:  # with no foreign-CPU limit, only the hypervisor's steal flags a run
        pytest.skip(f"a run was flagged, so the graph leaves it out: {flagged[0]}")
    # Two sessions: grouped by session, the second (prepared statements) against the first.
    assert [c["id"] for c in report["cpu_flames"]] == ["flame-diff-1"]
    path = tmp_path / "profiles.html"
    done = run_in(env, "report", *map(str, run_ids), "-o", str(path))
    assert done.code == 0, done.stderr
    with chromium() as browser:
        page = browser.open(path, wait_for="window.reportReady === true")
        for run_id in run_ids:
            chart = f"run-{run_id}-flame"
            page.evaluate(f"document.getElementById('run-{run_id}').open = true")
            page.wait_for(f"document.getElementById('{chart}').dataset.drawn === 'yes'")
            drawn = page.evaluate(
                f"(el => ({{type: el.data[0].type, ids: el.data[0].ids.length,"
                f" bars: el.querySelectorAll('g.slice').length}}))"
                f"(document.getElementById('{chart}'))"
            )
            assert drawn["type"] == "icicle" and drawn["ids"] > 2 and drawn["bars"] > 2, drawn
            text = page.evaluate(f"document.getElementById('run-{run_id}').innerText")
            assert "Top CPU functions" in text
        page.wait_for("document.getElementById('flame-diff-1').dataset.drawn === 'yes'")
        drawn = page.evaluate(
            "(el => ({type: el.data[0].type, colours: el.data[0].marker.colors.length,"
            " ids: el.data[0].ids.length, bars: el.querySelectorAll('g.slice').length,"
            " scale: el.querySelectorAll('.colorbar').length}))"
            "(document.getElementById('flame-diff-1'))"
        )
        assert drawn["type"] == "icicle" and drawn["colours"] == drawn["ids"] > 2, drawn
        assert drawn["bars"] > 2 and drawn["scale"] == 1, drawn
        text = page.evaluate("document.getElementById('cpu').innerText")
        assert "Differential flame graphs" in text and "cannot be drawn in their shape" in text
        assert page.console_errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(ARTIFACTS / "report-profiles.png")


def test_without_perf_one_line_says_so_and_the_run_goes_on(
    workdir: Path, cache_dir: Path, server: Sandbox, tmp_path: Path
) -> None:
    """A PATH without perf on it: the commands pgdyno starts its children through are there,
    perf is not."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("setpriv", "sh"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = make_env(workdir, cache_dir)
    env = replace(env, env={**env.env, "PATH": str(bin_dir)})
    done = run_in(env, *BENCH[:-3], "-T", "1", "--json", "--cpu-profile", "--dsn",
                  server.conninfo())  # fmt: skip
    assert done.code == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "CPU profile" in line]
    assert len(said) == 1 and "perf is not installed" in said[0], done.stderr
    run_id = str(json.loads(done.stdout)[0]["id"])
    assert json.loads(run_in(env, "runs", "show", run_id, "--json").stdout)["profile"] is None
    refused = run_in(env, "runs", "show", run_id, "--profile")
    assert refused.code == 2 and "has no CPU profile" in refused.stderr


def test_the_default_turned_off_takes_no_profile_and_says_nothing(
    workdir: Path, cache_dir: Path, server: Sandbox
) -> None:
    """PGDYNO_CPU_PROFILE=off (as the suite has it): no profile and no line about it, unless
    `--cpu-profile` asks (the module's fixture does)."""
    env = make_env(workdir, cache_dir)
    assert env.env[CPU_PROFILE_ENV] == "off"
    done = run_in(env, *BENCH[:-3], "-T", "1", "--json", "--dsn", server.conninfo())
    assert done.code == 0, done.stderr
    assert "CPU profile" not in done.stderr, done.stderr
    run_id = str(json.loads(done.stdout)[0]["id"])
    refused = run_in(env, "runs", "show", run_id, "--profile")
    assert refused.code == 2 and "PGDYNO_CPU_PROFILE=off" in refused.stderr, refused.stderr
