"""Twin servers (issue 33, section 2) on real sandboxes with real pgbench: `plan check` names the
design and why (or why not: the servers do not fit in memory), an A/A-ish comparison of a
setting that needs a restart runs on two servers each started exactly once with no restart
between runs and nothing left running, and Ctrl-C in the middle leaves no postmaster.

The comparisons share one work directory (the module's): its twins and their datasets are made
once; the A/A test runs first and counts the starts in the twins' own server logs."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from conftest import (
    IS_ROOT,
    cli_in,
    make_env,
    new_workdir,
    pgdyno_process,
    postmaster_running,
    remove_workdir,
    wait_for,
)
from leftovers import processes_in
from pgdyno.experiment.target import sandbox_binaries
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.process import pid_alive
from plans import tiny_plan

READY = "database system is ready to accept connections"

# shared_buffers 128MB against 129MB: a setting that needs a restart, a change too small to see
AA = (("a", {"shared_buffers": "128MB"}), ("b", {"shared_buffers": "129MB"}))
Sets = Sequence[tuple[str, Mapping[str, object]]]


@pytest.fixture(scope="module")
def twins_workdir() -> Iterator[Path]:
    path = new_workdir()
    yield path
    remove_workdir(path)


def plan(directory: Path, name: str, sets: Sets = AA, **matrix: object) -> Path:
    """The tiny plan (tests/plans.py) of `sets`, two rounds unless `matrix` says otherwise."""
    path = directory / f"{name}.toml"
    path.write_text(tiny_plan(name, sets, **{"repeats": 2, **matrix}))
    return path


def starts(workdir: Path, cluster: str) -> int:
    """How many times a sandbox's postmaster came up, from its own server log."""
    log = workdir / "clusters" / cluster / "log" / "postgresql.log"
    return log.read_text(errors="replace").count(READY) if log.exists() else 0


def running_twin(workdir: Path, cluster: str) -> bool:
    pid_file = workdir / "clusters" / cluster / "data" / "postmaster.pid"
    try:
        return pid_alive(int(pid_file.read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        return False


def test_plan_check_names_twins_and_why_not(shared_workdir: Path, tmp_path: Path, run_cli):
    checked = run_cli(shared_workdir, "plan", "check", str(plan(tmp_path, "tw")))
    assert checked.code == 0, checked.stderr
    assert "design: twin servers" in checked.stdout
    assert "shared_buffers needs a restart; the 2 servers fit in memory side by side" in (
        checked.stdout
    )
    huge = (AA[0], ("b", {"shared_buffers": "1TB"}))
    for design in (None, "twins"):
        path = plan(tmp_path, "huge", huge, design=design)
        fallback = run_cli(shared_workdir, "plan", "check", str(path))
        assert fallback.code == 0, fallback.stderr
        assert (
            "design: one run per set and round: twins: not enough memory for 2 servers with "
            "shared_buffers 128MB + 1024GB"
        ) in fallback.stdout, fallback.stdout
        assert "headroom)" in fallback.stdout
    assert not (shared_workdir / "clusters" / "pg18-a").exists()  # nothing made, nothing started
    reload_only = (("a", {"work_mem": "4MB"}), ("b", {"work_mem": "8MB"}))
    runs = run_cli(shared_workdir, "plan", "check", str(plan(tmp_path, "wm", reload_only)))
    assert "twin servers" not in runs.stdout


def test_a_restart_aa_runs_on_two_servers_started_once(
    twins_workdir: Path, tmp_path: Path, cache_dir: Path, binaries: Binaries
):
    """shared_buffers 128MB against 129MB: each set's runs go to its own twin, started once;
    no server restarts between runs, and none is left running."""
    cli = cli_in(twins_workdir, cache_dir)
    path = plan(tmp_path, "aa")
    result = cli("compare", str(path), "--seed", "3", "--json")
    assert result.code == 0, result.stderr
    assert "design: twin servers" in result.stderr
    major = binaries.major
    twins = [f"pg{major}-a", f"pg{major}-b"]
    assert [starts(twins_workdir, t) for t in twins] == [1, 1]
    with sqlite3.connect(twins_workdir / "results.sqlite") as db:
        rows = db.execute("SELECT set_name, pgbench_argv FROM runs ORDER BY id").fetchall()
    assert len(rows) == 4
    # pgbench connects through the socket of the set's own twin
    for set_name, argv in rows:
        assert f"clusters/pg{major}-{set_name}/socket" in argv, (set_name, argv)
    assert len({s for s, _ in rows[:2]}) == 2  # the sets alternated: runs switched servers
    assert not postmaster_running(twins_workdir)
    assert not processes_in(twins_workdir, "postgres")
    # The idle twin's work during every run of the other set: stored with the run, reported.
    with sqlite3.connect(twins_workdir / "results.sqlite") as db:
        events = db.execute(
            "SELECT r.set_name, e.detail FROM run_events e JOIN runs r ON r.id = e.run_id"
            " WHERE e.kind = 'idle_twin' ORDER BY r.id"
        ).fetchall()
    assert len(events) == 4
    for set_name, detail in events:
        idle = json.loads(detail)
        other = "b" if set_name == "a" else "a"
        assert idle["server"] == f"pg{major}-{other}" and idle["measured_set"] == set_name
        assert idle["cpu_s"] >= 0 and idle["wall_s"] > 0 and idle["checkpoints"] >= 0
    data = json.loads(result.stdout)
    assert (data["rounds"]["design"], data["rounds"]["seed"]) == ("twins", 3)  # stored as run
    change = next(r for r in data["analysis"]["results"] if r["set_name"] == "b")["tps_change"]
    assert change is None or change["verdict"] not in ("better", "worse"), change
    shares = {share["set_name"]: share for share in data["idle_twins"]}
    assert sorted(shares) == ["a", "b"] and {s["runs"] for s in shares.values()} == {2}
    assert all(0 <= s["cpu_share"] < 1 for s in shares.values())
    # --resume goes on on twin servers (every run was made: none runs, no server starts)
    resumed = cli("compare", str(path), "--resume", "--json")
    assert resumed.code == 0, resumed.stderr
    assert "design: twin servers" in resumed.stderr
    assert json.loads(resumed.stdout)["rounds"]["design"] == "twins"
    assert [starts(twins_workdir, t) for t in twins] == [1, 1]
    listed = cli("sandbox", "status")
    assert listed.code == 0 and all(t in listed.stdout for t in twins), listed.stdout
    # The version's sandbox, not a twin, is the one a later command picks as "used last"
    said: list[str] = []
    sandbox_binaries(make_env(twins_workdir, cache_dir), None, None, said.append)
    assert said and f"this work directory's sandbox pg{major};" in said[0], said
    # `sandbox stop --pg-version N` stops the version's twins too
    twin = Sandbox(twins_workdir / "clusters" / twins[0], sandbox_user(IS_ROOT, create=False))
    twin.start({}, owner_pid=None)
    stopped = cli("sandbox", "stop", "--pg-version", str(major))
    assert stopped.code == 0 and twins[0] in stopped.stdout, stopped.stdout
    assert not postmaster_running(twins_workdir)


def test_ctrl_c_mid_comparison_leaves_no_postmaster(
    twins_workdir: Path, tmp_path: Path, binaries: Binaries
):
    """SIGINT while both twins run and pgbench measures one of them: every server stops, and
    the comparison is stored as run on twins."""
    path = plan(tmp_path, "long", repeats=20, duration=3)
    with pgdyno_process("compare", str(path), "--workdir", str(twins_workdir)) as proc:
        both = wait_for(
            lambda: (
                all(
                    running_twin(twins_workdir, t)
                    for t in (f"pg{binaries.major}-a", f"pg{binaries.major}-b")
                )
                and bool(processes_in(twins_workdir, "pgbench"))
            ),
            timeout=240,
        )
        os.kill(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert both, "the two twins never ran side by side"
    assert proc.returncode != 0 and "interrupted" in stderr, stderr
    assert wait_for(lambda: not processes_in(twins_workdir, "pgbench"), timeout=15)
    assert not postmaster_running(twins_workdir)
    # Its design stored from the start (no round had ended): --resume goes on on twins
    with sqlite3.connect(twins_workdir / "results.sqlite") as db:
        (rounds,) = db.execute("SELECT rounds FROM comparisons ORDER BY id DESC").fetchone()
    assert rounds is not None and json.loads(rounds)["design"] == "twins", rounds
