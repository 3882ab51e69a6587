"""Interference on process tables recorded on this VM (tests/data/proc/interference/README.md),
and its way through the results store, `runs show` and the report.

Expected tick counts are copied by hand out of the recorded `<pid>/stat` files (fields 14-17:
utime, stime, cutime, cstime) and `stat` (the cpu line), not computed by the code under test.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pgdyno.collect.interference import (
    FOREIGN_CPU_MAX_PCT,
    STEAL_MAX_PCT,
    ProcessTable,
    cpu_ticks,
    flagged_interference,
    foreign_ticks,
    is_flagged,
    measure_interference,
    parse_pid_stat,
    read_processes,
)
from pgdyno.collect.procfs import parse_stat
from pgdyno.process import start_time
from pgdyno.records import RunCell, RunRecord
from pgdyno.records.interference import Interference
from pgdyno.records.stored import NewComparison
from pgdyno.report import content, html
from pgdyno.report.load import Selection, load
from pgdyno.results import decode
from pgdyno.results.encode import interference_json, to_json
from pgdyno.results.sqlite_db import migrate
from pgdyno.results.store import ResultsStore
from pgdyno.textsafe import strict_json

DATA = Path(__file__).parent.parent / "data"
TABLES = DATA / "proc" / "interference"
AT = (10940.812268, 10954.776924)  # t0/at, t1/at
WALL = AT[1] - AT[0]
CPUS = 2
HZ = 100
MACHINE_TICKS = 2788  # sum of the cpu line's 8 columns, t1 - t0
EXPERIMENT = ("pgdyno-rec", "exp-busy", "exp-writer", "srv-main", "srv-backend")
# A flagged run as it is stored and printed (results/encode.py's interference_json).
FLAGGED = {"foreign_cpu_pct": 48.2, "steal_pct": 0.0, "top": [["<b>hog", 47.5], ["make", 0.7]]}


def table(name: str) -> ProcessTable:
    at = AT[("t0", "t1").index(name)]
    return read_processes(TABLES / name, clock=lambda: at)


@pytest.fixture(scope="module")
def t0() -> ProcessTable:
    return table("t0")


@pytest.fixture(scope="module")
def t1() -> ProcessTable:
    return table("t1")


def pid_of(snapshot: ProcessTable, comm: str) -> int:
    (pid,) = [p.pid for p in snapshot.processes.values() if p.comm == comm]
    return pid


def roots(snapshot: ProcessTable, *comms: str) -> list[int]:
    return [pid_of(snapshot, comm) for comm in comms]


# -- reading ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["t0", "t1"])
def test_every_recorded_process_is_read(name: str) -> None:
    snapshot = table(name)
    pids = {int(p.name) for p in (TABLES / name).iterdir() if p.name.isdigit()}
    assert set(snapshot.processes) == pids and len(pids) >= 100
    # PF_KTHREAD agrees with "pid 2 or a child of pid 2" on a host.
    for process in snapshot.processes.values():
        assert process.kernel == (process.pid == 2 or process.ppid == 2), process
    assert snapshot.at == AT[("t0", "t1").index(name)]


def test_a_recorded_line_is_parsed_field_by_field() -> None:
    line = (TABLES / "t0" / "8105" / "stat").read_bytes()
    process = parse_pid_stat(line)
    assert (process.pid, process.ppid, process.comm) == (
        8105,
        2,
        "kworker/u8:1-ext4-rsv-conversion",
    )
    assert (process.ticks, process.starttime, process.kernel) == (0 + 94 + 0 + 0, 613252, True)
    hog = parse_pid_stat((TABLES / "t1" / "24466" / "stat").read_bytes())
    assert (hog.comm, hog.ppid, hog.ticks, hog.starttime, hog.kernel) == (
        "hog", 1, 440 + 1, 1093847, False
    )  # fmt: skip


def test_steal_and_total_come_from_the_cpu_line(t0: ProcessTable, t1: ProcessTable) -> None:
    # t0: cpu  570463 2736 296775 1228387 19443 0 4668 403 0 0
    assert (t0.steal, t0.total) == (403, 570463 + 2736 + 296775 + 1228387 + 19443 + 4668 + 403)
    assert (t1.steal - t0.steal, t1.total - t0.total) == (2, MACHINE_TICKS)


def test_the_live_process_table_matches_the_kernel() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        try:
            live = read_processes(Path("/proc"))
        finally:
            child.kill()
    me = live.processes[os.getpid()]
    assert me.starttime == start_time(os.getpid()) and not me.kernel
    assert live.processes[child.pid].ppid == os.getpid()
    assert live.processes[2].kernel and live.total > 0


# -- who is the experiment -------------------------------------------------------------------


def test_the_roots_descendants_are_the_experiment(t0: ProcessTable, t1: ProcessTable) -> None:
    by_command = foreign_ticks(t0, t1, roots(t1, "pgdyno-rec", "srv-main"))
    assert not set(EXPERIMENT) & set(by_command)
    assert by_command["hog"] == (440 + 1) - 61
    # Strangers of the recording: another benchmark's postgres and pgbench.
    assert by_command["postgres"] > 0 and by_command["pgbench"] > 0


def test_a_server_that_is_not_known_counts_as_foreign(t0: ProcessTable, t1: ProcessTable) -> None:
    by_command = foreign_ticks(t0, t1, roots(t1, "pgdyno-rec"))
    assert by_command["srv-backend"] == (425 + 1) - 53
    assert "exp-busy" not in by_command


def test_kernel_threads_are_neither_experiment_nor_foreign(
    t0: ProcessTable, t1: ProcessTable
) -> None:
    ticks = cpu_ticks(t0, t1)
    # They worked: writing back exp-writer's gigabyte among other things.
    assert ticks[(77, 132)] == 3310 - 3302  # kdamond.0
    assert ticks[(8105, 613252)] == 98 - 94  # kworker/u8:1-ext4-rsv-conversion
    kernel = {p.comm for p in t1.processes.values() if p.kernel}
    assert not kernel & set(foreign_ticks(t0, t1, roots=()))


def test_a_reused_pid_is_a_new_process(t0: ProcessTable, t1: ProcessTable) -> None:
    old, new = t0.processes[24483], t1.processes[24483]
    assert (old.comm, new.comm) == ("old-tenant", "new-tenant")
    assert old.starttime != new.starttime and old.ticks == 11 + 18 > new.ticks == 6 + 13
    by_command = foreign_ticks(t0, t1, roots(t1, "pgdyno-rec", "srv-main"))
    assert by_command["new-tenant"] == 6 + 13  # counted from zero, not from old-tenant's 29
    # sh-parent reaped old-tenant: its cutime/cstime grew by old-tenant's 29 ticks, all used
    # before t0, so it took nothing during the interval.
    assert (t1.processes[24482].ticks - t0.processes[24482].ticks) == 11 + 18
    assert "sh-parent" not in by_command


def test_cutime_catches_a_child_reaped_within_the_run(t0: ProcessTable, t1: ProcessTable) -> None:
    assert "cc1" not in {p.comm for s in (t0, t1) for p in s.processes.values()}
    make = pid_of(t1, "make")
    assert t0.processes[make].ticks == 2 and t1.processes[make].ticks == 2 + 0 + 16 + 23
    by_command = foreign_ticks(t0, t1, roots(t1, "pgdyno-rec", "srv-main"))
    assert by_command["make"] == 16 + 23  # cc1's 0.4 s, through make's cutime and cstime


def test_a_chain_of_exited_parents_ends_in_the_live_ancestor(
    t0: ProcessTable, t1: ProcessTable
) -> None:
    """A stranger's shell (6771) ran bash 24069 -> bash 24070 -> python 24073 -> python 24088
    and pgbench 24471; all of them exited and were reaped in turn during the interval, so
    6771's cutime/cstime took in their whole lives, the part before t0 included."""
    gone = {24069: 0, 24070: 0, 24073: 17 + 7 + 950 + 55, 24088: 5 + 1, 24471: 53}
    assert all(t0.processes[pid].ticks == ticks for pid, ticks in gone.items())
    assert not set(gone) & set(t1.processes)
    raw = (1 + 5 + 4886 + 4917) - (1 + 5 + 3548 + 4829)
    assert cpu_ticks(t0, t1)[(6771, 1050752)] == raw - sum(gone.values())


# -- figures ---------------------------------------------------------------------------------


def share(ticks: int) -> float:
    return round(100.0 * ticks / (CPUS * WALL * HZ), 1)


def test_figures_are_shares_of_the_whole_machine(t0: ProcessTable, t1: ProcessTable) -> None:
    experiment = roots(t1, "pgdyno-rec", "srv-main")
    found = measure_interference(t0, t1, experiment, CPUS, WALL, hz=HZ)
    by_command = foreign_ticks(t0, t1, experiment)
    assert found.foreign_cpu_pct == share(sum(by_command.values()))
    assert found.steal_pct == round(100.0 * 2 / MACHINE_TICKS, 1) == 0.1
    assert ("hog", share(380)) in found.top and share(380) == 13.6
    # The five biggest commands, biggest first.
    biggest = sorted(by_command, key=lambda c: -by_command[c])[:5]
    assert [command for command, _ in found.top] == biggest
    assert [pct for _, pct in found.top] == sorted((pct for _, pct in found.top), reverse=True)
    assert flagged_interference(t0, t1, experiment, CPUS, WALL, hz=HZ) == found
    assert is_flagged(found) and found.foreign_cpu_pct > FOREIGN_CPU_MAX_PCT


def test_a_short_look_is_at_most_the_whole_machine(t0: ProcessTable, t1: ProcessTable) -> None:
    """The recorded tables, as if their reads were a sixth of the wall time apart: the foreign
    ticks come to more than the machine's; the share says 100%, so a plan that tolerates 100%
    is not told its host is busy (the 1 s look before a comparison said 100.5% once)."""
    experiment = roots(t1, "pgdyno-rec", "srv-main")
    short = WALL / 6
    assert sum(foreign_ticks(t0, t1, experiment).values()) > CPUS * short * HZ
    found = measure_interference(t0, t1, experiment, CPUS, short, hz=HZ)
    assert found.foreign_cpu_pct == 100.0
    assert not is_flagged(found, foreign_limit_pct=100)


def test_a_run_with_nothing_foreign_is_clean(t0: ProcessTable, t1: ProcessTable) -> None:
    # Everything but kernel threads descends from pid 1.
    assert flagged_interference(t0, t1, [1], CPUS, WALL, hz=HZ) is None
    assert measure_interference(t0, t1, [1], CPUS, WALL, hz=HZ) == Interference(0.0, 0.1, ())


def test_steal_alone_flags_a_run(t0: ProcessTable, t1: ProcessTable) -> None:
    cpu = parse_stat((TABLES / "edited-steal" / "stat").read_text()).cpu
    stolen = replace(t1, steal=cpu.steal, total=t1.total)  # 280 ticks moved from user to steal
    assert cpu.steal - t0.steal == 282
    found = flagged_interference(t0, stolen, [1], CPUS, WALL, hz=HZ)
    assert found == Interference(0.0, round(100.0 * 282 / MACHINE_TICKS, 1), ())
    assert found.steal_pct == 10.1 > STEAL_MAX_PCT


def test_the_stored_shape_and_the_warning() -> None:
    found = Interference(48.2, 0.0, (("<b>hog", 47.5), ("make", 0.7)))
    assert interference_json(found) == FLAGGED
    assert json.loads(strict_json(interference_json(found))) == FLAGGED
    assert decode.interference(FLAGGED) == found  # what the store reads back
    assert found.warning() == (
        "interference: other processes took 48.2% of the CPUs (<b>hog 47.5%, make 0.7%)"
    )
    assert (
        Interference(1.0, 5.5, ()).warning().endswith("the hypervisor stole 5.5% of the CPU time")
    )


# -- store, runs show, report -----------------------------------------------------------------


def a_run(**changes: object) -> RunRecord:
    run = RunRecord(
        cell=RunCell(0, 1, "select-only", 1, 1, 1), status="ok", started_at="a",
        finished_at="b", duration_s=5, protocol="simple", rate=None, warmup_s=0,
        pg_version="18.6", pgbench_version="18.6", pgbench_argv=("pgbench",), settings={},
        dataset_bytes=None,
    )  # fmt: skip
    return replace(run, **changes)  # type: ignore[arg-type]


def test_a_schema_4_database_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=4)
    conn.execute(
        "INSERT INTO sessions (started_at, hostname, pid, command, target, host, server)"
        " VALUES ('t', 'h', 1, '[]', 'sandbox pg18', '{}', '{}')"
    )
    conn.execute(
        "INSERT INTO runs (session_id, status, started_at, finished_at, workload, scale, clients,"
        " jobs, duration_s, protocol, repeat, warmup_s, tps, pg_version, pgbench_version,"
        " pgbench_argv, settings) VALUES (1, 'ok', 'a', 'b', 'tpcb-like', 1, 1, 1, 10, 'simple',"
        " 1, 0, 123.5, '18.6', '18.6', '[]', '{}')"
    )
    conn.close()
    with ResultsStore(path) as store:
        old = store.get_run(1)
        flagged = store.add_run(1, a_run(interference=decode.interference(FLAGGED)))
        clean = store.add_run(1, a_run())
        got = {run_id: store.get_run(run_id) for run_id in (flagged, clean)}
        listed = {r.id: r.interference for r in store.list_runs()}
    assert old is not None and old.interference is None and not old.interfered
    assert to_json(old)["interference"] is None
    run = got[flagged]
    assert run is not None and run.interfered and run.interference is not None
    assert interference_json(run.interference) == FLAGGED
    assert to_json(run)["interference"] == FLAGGED
    assert listed == {1: None, flagged: decode.interference(FLAGGED), clean: None}
    assert run.outcome().interfered and to_json(run.outcome())["interference"] == FLAGGED
    assert got[clean] is not None and not got[clean].outcome().interfered


def test_compare_runs_carry_the_interference(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        session = store.begin_session(["pgdyno", "compare"], "sandbox pg18", {}, {})
        cid = store.comparisons.create(
            NewComparison(
                name="p", plan_path="p.toml", plan_digest="d", plan_text="", mode="sets",
                baseline="a", scales=(1,), sets=(("a", {}), ("b", {})),
            )
        )  # fmt: skip
        for name, found in (("a", None), ("b", decode.interference(FLAGGED))):
            store.add_run(session, a_run(comparison_id=cid, set_name=name, interference=found))
        runs = store.comparisons.runs(cid)
    assert [(r.set_name, r.interfered) for r in runs] == [("a", False), ("b", True)]
    assert [to_json(r)["interference"] for r in runs] == [None, FLAGGED]


@pytest.fixture
def flagged_results(tmp_path: Path) -> Path:
    """The recorded report database with run 3 flagged; the work directory holding it."""
    shutil.copy(DATA / "report" / "results.sqlite", tmp_path / "results.sqlite")
    with ResultsStore(tmp_path / "results.sqlite") as store:  # migrates the copy
        store.db.conn.execute(
            "UPDATE runs SET interference = ? WHERE id = 3", (json.dumps(FLAGGED),)
        )
    return tmp_path


def test_runs_show_has_the_interference(run_cli, flagged_results: Path) -> None:
    shown = run_cli(flagged_results, "runs", "show", "3", "--json")
    assert shown.code == 0, shown.stderr
    assert json.loads(shown.stdout)["interference"] == FLAGGED
    other = run_cli(flagged_results, "runs", "show", "4", "--json")
    assert json.loads(other.stdout)["interference"] is None
    text = run_cli(flagged_results, "runs", "show", "3")
    assert text.code == 0, text.stderr
    assert "foreign CPU 48.2%, steal 0.0% of the machine; top: <b>hog 47.5%, make 0.7%" in " ".join(
        text.stdout.split()
    )
    assert "foreign CPU" not in run_cli(flagged_results, "runs", "show", "4").stdout


def test_the_report_shows_flagged_runs(flagged_results: Path) -> None:
    with ResultsStore(flagged_results / "results.sqlite") as store:
        data = load(store, Selection(run_ids=(3, 4)))
    report = content.build(data, "2026-11-23T00:00:00+00:00", "test")
    entries = {r["id"]: r for r in report["runs"]}
    assert entries[3]["interference"] == FLAGGED and entries[4]["interference"] is None
    assert any("flagged for interference" in note and "runs 3" in note for note in report["notes"])
    page = html.render(report)
    assert page.count('class="interfered"') == 1
    assert "Flagged for interference" in page and "&lt;b&gt;hog 47.5%" in page
    assert "<b>hog" not in page.split('<script id="report-data"')[0]
