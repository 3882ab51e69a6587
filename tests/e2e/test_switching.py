"""Switching inside one run (issue 33, section 2) on a real sandbox with real pgbench: `plan
check` names the design and why, an A/A comparison runs as one pgbench run whose periods are
stored as runs of their sets, a real change (index scans off) is found by switching, and
Ctrl-C in the middle leaves the server as found.

The comparisons run in a PID namespace of their own (tests/host_conditions.py `quiet_pgdyno`):
the host's other work does not flag their periods for foreign CPU."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

from conftest import cli_in, make_env, pgdyno_process, postmaster_running, wait_for
from host_conditions import no_steal, quiet_pgdyno
from leftovers import processes_in
from pgdyno.experiment.target import open_sandbox
from pgdyno.plan.model import DEFAULT_BURN_IN_S, DEFAULT_PERIOD_S
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.undo.server import pending_changes
from plans import bare_plan, tiny_plan

SECRET = "not-a-secret-switching"
State = tuple[dict[str, tuple[str, str]], str]


def server_state(box: Sandbox) -> State:
    """Every setting's value and source, and postgresql.auto.conf's text."""
    with connect(box.conninfo()) as client:
        rows = client.rows("SELECT name, setting, source FROM pg_settings")
    settings = {str(name): (str(setting), str(source)) for name, setting, source in rows
                if name != "huge_pages_status"}  # fmt: skip
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


Sets = Sequence[tuple[str, Mapping[str, object]]]
# A reload-only A/A: the log's slow-statement threshold, which select-only never reaches
AA = (("a", {"log_min_duration_statement": -1}), ("b", {"log_min_duration_statement": 100000}))
# The default period and burn-in (plan/model.py DEFAULT_PERIOD_S, DEFAULT_BURN_IN_S).
AA_MATRIX: Mapping[str, object] = {"warmup": 0, "precision": 2.0, "budget": "40s"}
# A write workload whose commits wait for the WAL flush, then do not (the Ctrl-C test)
SYNC = (("on", {"synchronous_commit": "on"}), ("off", {"synchronous_commit": "off"}))
SYNC_MATRIX: Mapping[str, object] = {
    "workloads": ["tpcb-like"], "clients": [2], "warmup": 0, "period": 5, "burn_in": 1,
    "precision": 0.1, "budget": "10m",
}  # fmt: skip
# A real change that costs CPU: with index and bitmap scans off, each select-only query reads
# the whole table. (synchronous_commit was tried here: beside the suite's other tests' fsyncs
# its rounds ran from 1.0x to 20x, and 16 rounds of 3 minutes did not always resolve it.)
SEQSCAN = (
    ("index", {"enable_indexscan": "on", "enable_bitmapscan": "on"}),
    ("seqscan", {"enable_indexscan": "off", "enable_bitmapscan": "off"}),
)
SEQSCAN_MATRIX: Mapping[str, object] = {
    "workloads": ["select-only"], "clients": [2], "warmup": 0, "period": 5, "burn_in": 1,
    "precision": 20.0, "budget": "3m",
}  # fmt: skip


def plan(directory: Path, name: str, sets: Sets = AA, **matrix: object) -> Path:
    """The plan of `sets` (tests/plans.py `bare_plan`): the A/A's matrix unless `matrix` is
    given."""
    path = directory / f"{name}.toml"
    path.write_text(bare_plan(name, sets, **(matrix or AA_MATRIX)))
    return path


def periods(workdir: Path, comparison_id: int) -> list[dict[str, Any]]:
    """The stored runs of a comparison with their `switching_period` event, in run order."""
    with sqlite3.connect(workdir / "results.sqlite") as db:
        db.row_factory = sqlite3.Row
        rows = db.execute(
            "SELECT r.id, r.set_name, r.repeat, r.status, r.pgbench_argv, e.t, e.detail"
            " FROM runs r LEFT JOIN run_events e ON e.run_id = r.id"
            " AND e.kind = 'switching_period' WHERE r.comparison_id = ? ORDER BY r.id",
            (comparison_id,),
        )
        return [dict(row) for row in rows]


def test_plan_check_names_the_design_and_why(shared_workdir: Path, tmp_path: Path, run_cli):
    checked = run_cli(shared_workdir, "plan", "check", str(plan(tmp_path, "aa")))
    assert checked.code == 0, checked.stderr
    assert (
        "design: switching inside runs: every set changes only reload settings that act at once"
        in checked.stdout
    )
    assert (
        f"the sets take turns every {DEFAULT_PERIOD_S} s, the first {DEFAULT_BURN_IN_S:g} s "
        "after each switch dropped (to the next whole second)" in checked.stdout
    )
    wal = (AA[0], ("b", {"max_wal_size": "2GB"}))
    per_run = run_cli(shared_workdir, "plan", "check", str(plan(tmp_path, "wal", wal)))
    assert per_run.code == 0, per_run.stderr
    assert "design: one run per set and round: max_wal_size acts over minutes" in per_run.stdout
    insisted = plan(tmp_path, "ins", wal, **AA_MATRIX, design="inside")
    refused = run_cli(shared_workdir, "plan", "check", str(insisted))
    assert refused.code == 2
    assert "max_wal_size acts over minutes" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr


def test_an_aa_comparison_switches_inside_one_pgbench_run(quiet_workdir: Path, tmp_path: Path):
    result = quiet_pgdyno(quiet_workdir, "compare", str(plan(tmp_path, "aa")), "--json",
                          "--seed", "5")  # fmt: skip
    assert result.code == 0, result.stderr
    assert "design: switching inside runs" in result.stderr
    data = json.loads(result.stdout)
    no_steal([r["interference"] for r in data["runs"]])
    rounds = data["rounds"]
    assert (rounds["design"], rounds["seed"]) == ("switching", 5)
    orders = [tuple(o) for o in rounds["order"]]
    assert len(set(orders)) == 2, orders  # drawn per round from the seed, not always a b
    stored = periods(quiet_workdir, data["comparison"]["id"])
    assert len(stored) == 2 * rounds["rounds"]
    assert [r["set_name"] for r in stored] == [s for o in orders for s in o]
    assert [r["repeat"] for r in stored] == [r for r in range(1, rounds["rounds"] + 1)
                                             for _ in (1, 2)]  # fmt: skip
    details = [json.loads(r["detail"]) for r in stored]
    assert {d["design"] for d in details} == {"inside"}
    # One pgbench start for the whole comparison: every period names the same one.
    assert len({d["pgbench_started_at"] for d in details}) == 1
    assert len({r["pgbench_argv"] for r in stored}) == 1
    for d in details:  # the burn-in dropped; the period ends on a whole second
        assert d["first_second"] >= d["switched_at"] + DEFAULT_BURN_IN_S
        assert d["last_second"] == math.floor(d["ended_at"]) - 1
        assert d["last_second"] >= d["first_second"]  # a whole second measured at least
    for d, after in itertools.pairwise(details):  # the next switch after this period's end
        assert after["switched_at"] >= d["ended_at"]
    assert [d["period"] for d in details] == list(range(1, len(details) + 1))
    change = next(r for r in data["analysis"]["results"] if r["set_name"] == "b")["tps_change"]
    assert change is None or change["verdict"] not in ("better", "worse"), change


def test_a_real_change_is_found_by_switching(quiet_workdir: Path, tmp_path: Path):
    """Index scans off on select-only: every query reads the whole table, a loss far larger
    than any noise of this host, found within the few rounds every verdict needs."""
    path = plan(tmp_path, "seqscan", SEQSCAN, **SEQSCAN_MATRIX)
    result = quiet_pgdyno(quiet_workdir, "compare", str(path), "--json",
                          "--seed", "8")  # fmt: skip
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    no_steal([r["interference"] for r in data["runs"]])
    assert data["rounds"]["design"] == "switching"
    change = next(r for r in data["analysis"]["results"] if r["set_name"] == "seqscan")
    assert change["tps_change"]["verdict"] == "worse", change
    assert change["tps_change"]["ci_high_pct"] < 0, change


def test_ctrl_c_mid_run_leaves_the_server_as_found(
    workdir: Path, tmp_path: Path, cache_dir: Path, binaries: Binaries
):
    """SIGINT while set "off" is in effect inside the run: pgdyno stops pgbench, keeps the
    periods that finished, stops the sandbox, and the server starts again with neither set's
    setting (pg_settings and postgresql.auto.conf as they were)."""
    path = plan(tmp_path, "sync", SYNC, **SYNC_MATRIX)
    conf = workdir / "clusters" / f"pg{binaries.major}" / "data"
    with pgdyno_process("compare", str(path), "--workdir", str(workdir), "--seed", "8") as proc:

        def off_in_effect() -> bool:
            settings = conf / "pgdyno.settings.conf"
            return (
                settings.exists()
                and "synchronous_commit = 'off'" in settings.read_text()
                and bool(processes_in(workdir, "pgbench"))
            )

        assert wait_for(off_in_effect, timeout=240), "set off never came into effect"
        auto_conf = (conf / "postgresql.auto.conf").read_text()
        os.kill(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "interrupted" in stderr, stderr
    assert wait_for(lambda: not processes_in(workdir, "pgbench"), timeout=15)
    assert not postmaster_running(workdir)
    assert (conf / "postgresql.auto.conf").read_text() == auto_conf
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _: None)
    box.start({}, owner_pid=os.getpid(), binaries=binaries)
    try:
        with psycopg.connect(box.conninfo()) as conn:
            row = conn.execute("SELECT setting, source FROM pg_settings WHERE name = "
                               "'synchronous_commit'").fetchone()  # fmt: skip
        assert row == ("on", "default")
    finally:
        box.stop()
    with sqlite3.connect(workdir / "results.sqlite") as db:
        statuses = [s for (s,) in db.execute("SELECT status FROM comparisons")]
    assert statuses == ["interrupted"]


def test_an_existing_server_switches_through_alter_system_and_is_left_as_found(
    workdir: Path, cache_dir: Path, server: Sandbox
):
    """`--dsn`: each period's set goes in with ALTER SYSTEM and a reload (journalled first,
    the previous set's undone), and the server ends exactly as found."""
    dsn = server.conninfo() + f" password={SECRET}"
    before = server_state(server)
    sets = (AA[0], ("b", {"work_mem": "8MB", "jit": False}))
    path = plan(workdir, "dsn", sets, **{**AA_MATRIX, "budget": "30s"})
    cli = cli_in(workdir, cache_dir, secret=SECRET)
    result = cli("compare", str(path), "--dsn", dsn, "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["rounds"]["design"] == "switching"
    stored = periods(workdir, data["comparison"]["id"])
    assert len(stored) == 2 * data["rounds"]["rounds"] >= 4
    assert len({json.loads(r["detail"])["pgbench_started_at"] for r in stored}) == 1
    settings = {
        name: json.loads(text)
        for name, text in sqlite3.connect(workdir / "results.sqlite").execute(
            "SELECT set_name, settings FROM runs"
        )
    }
    assert settings["b"]["work_mem"] == "8192 kB" and settings["b"]["jit"] == "off"
    assert "work_mem" not in settings["a"]
    assert changes(before, server_state(server)) == {}  # every ALTER SYSTEM undone, reloaded
    assert pending_changes(workdir) == []


def test_sigkill_mid_switching_keeps_its_rounds_then_rollback_and_resume(
    workdir: Path, tmp_path: Path, server: Sandbox, run_cli
):
    """SIGKILL while set b's ALTER SYSTEM is in effect inside the run, after a round was
    looked at: no pgbench is left, the rounds looked at are stored (each round's periods at
    its look), `pgdyno rollback` puts the server back exactly as found (from the journal), and
    `compare --resume` goes on switching inside one run after the stored rounds."""
    before = server_state(server)
    path = tmp_path / "kill.toml"
    path.write_text(tiny_plan(
        "kill", (("a", {"log_min_duration_statement": -1}), ("b", {"work_mem": "8MB"})),
        duration=None, repeats=2, period=5, burn_in=1, design="inside",
    ))  # fmt: skip
    auto_conf = server.data_dir / "postgresql.auto.conf"
    args = ("compare", str(path), "--dsn", server.conninfo(), "--workdir", str(workdir))

    def stored() -> list[dict[str, Any]]:
        if not (workdir / "results.sqlite").exists():
            return []
        try:
            with sqlite3.connect(workdir / "results.sqlite") as db:
                found = db.execute("SELECT max(id) FROM comparisons").fetchone()
            return periods(workdir, found[0]) if found and found[0] else []
        except sqlite3.OperationalError:  # not made yet, or busy: looked at again
            return []

    with pgdyno_process(*args) as proc:
        in_effect = wait_for(
            lambda: proc.poll() is not None or (
                "work_mem = '8MB'" in auto_conf.read_text()
                and bool(processes_in(workdir, "pgbench"))
                and len(stored()) >= 2
            ),
            timeout=240,
        )  # fmt: skip
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert in_effect, "set b never came into effect after a round was stored"
    kept = stored()
    assert len(kept) >= 2 and all(r["detail"] for r in kept), kept  # the periods survived
    assert [c.name for c in pending_changes(workdir)][-1] == "work_mem"
    assert wait_for(lambda: not processes_in(workdir, "pgbench"), timeout=15)
    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert pending_changes(workdir) == []
    # pg_reload_conf is asynchronous: the settings follow the files once it is processed.
    assert wait_for(lambda: changes(before, server_state(server)) == {}, timeout=30)
    resumed = run_cli(workdir, "compare", str(path), "--resume", "--dsn", server.conninfo(),
                      "--json")  # fmt: skip
    assert resumed.code == 0, resumed.stderr
    assert "design: switching inside runs" in resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["rounds"]["design"] == "switching"
    every = periods(workdir, data["comparison"]["id"])
    assert every[: len(kept)] == kept
    assert sorted(r["repeat"] for r in every) == [1, 1, 2, 2], every
    numbers = [json.loads(r["detail"])["period"] for r in every]
    assert len(set(numbers)) == len(numbers), numbers
    assert wait_for(lambda: changes(before, server_state(server)) == {}, timeout=30)
