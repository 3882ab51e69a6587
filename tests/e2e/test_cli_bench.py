"""`pgdyno bench` and `pgdyno runs` in-process, on the real sandbox and real pgbench."""

from __future__ import annotations

import json
import os
import pty
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_env
from pgdyno.experiment.target import open_sandbox

MAKEFILE = Path(__file__).parent.parent.parent / "Makefile"


def demo_command() -> list[str]:
    """The bench command `make demo` runs (the README's first command)."""
    for line in MAKEFILE.read_text().splitlines():
        if "pgdyno bench" in line:
            return line.split("pgdyno", 1)[1].split()
    raise AssertionError("Makefile has no demo bench command")


def shortened(command: list[str], seconds: str) -> list[str]:
    """`command` with its -T given as `seconds`.

    >>> shortened(["bench", "-c", "1,2", "-T", "10"], "4")
    ['bench', '-c', '1,2', '-T', '4']
    """
    at = command.index("-T") + 1
    return [*command[:at], seconds, *command[at + 1 :]]


def test_readme_demo_prints_a_tps_table_and_stores_series(run_cli, shared_workdir: Path):
    # The demo's own command but for its duration (10 s a run there): each of its four runs
    # is checked for whole seconds, which 4 s show as well.
    result = run_cli(shared_workdir, *shortened(demo_command(), "4"))
    assert result.code == 0, result.stderr
    assert "pgbench results" in result.stdout
    rows = [line for line in result.stdout.splitlines() if re.match(r"^│\s+\d+ │", line)]
    assert len(rows) == 4  # tpcb-like and select-only at 1 and 2 clients
    assert "results database: " in result.stdout
    with sqlite3.connect(shared_workdir / "results.sqlite") as db:
        runs = db.execute(
            "SELECT id, status, tps, duration_s FROM runs"
            " WHERE session_id = (SELECT max(id) FROM sessions)"
        ).fetchall()
        assert len(runs) == 4 and all(status == "ok" and tps > 0 for _, status, tps, _ in runs)
        for run_id, _, _, duration in runs:
            stamps = [t for (t,) in db.execute(
                "SELECT t FROM run_seconds WHERE run_id = ? ORDER BY t", (run_id,)
            )]  # fmt: skip
            # Whole seconds between pgbench's first and last completion; the cut first and last
            # are left out. Connecting can take a second on a loaded host: then one fewer.
            assert duration - 2 <= len(stamps) <= duration + 1
            assert stamps == list(range(stamps[0], stamps[0] + len(stamps)))  # no second missing


def test_second_bench_reuses_the_dataset(run_cli, shared_workdir: Path):
    args = ["bench", "--pg-version", "18", "--workload", "select-only", "-c", "1,2", "-T", "2"]
    first = run_cli(shared_workdir, *args)
    second = run_cli(shared_workdir, *args)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    # Said once, when it was ready, with what was done to it.
    assert len(re.findall(r"dataset pgbench scale \d+: reused \([\d,]+ MiB", second.stderr)) == 1
    assert "dataset" not in second.stdout.split("pgbench results")[-1].split("left on")[0]
    assert "creating sandbox" not in second.stderr


def test_runs_list_and_show(run_cli, shared_workdir: Path):
    bench = run_cli(
        # 3 s: the log then spans at least one whole second between the run's first and last
        # (which are left out); 2 s gave none once on a busy host
        shared_workdir, "bench", "--pg-version", "18", "-w", "tpcb-like", "-c", "2", "-T", "3",
        "--per-statement", "--json",
    )  # fmt: skip
    assert bench.code == 0, bench.stderr
    runs = json.loads(bench.stdout)
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "ok" and run["tps"] > 0 and run["clients"] == 2
    assert run["pg_version"].startswith("18") and run["pgbench_version"].startswith("18")
    assert run["pgbench_argv"][0].endswith("pgbench") and "-r" in run["pgbench_argv"]
    assert run["host"]["cpu_count"] >= 1 and run["host"]["memory_bytes"] > 0
    assert run["host"]["kernel"] and run["host"]["cpu_model"]
    assert "log_checkpoints" in run["settings"]  # non-default settings from pg_settings
    # tpcb-like: four \\set lines, BEGIN, three UPDATEs, a SELECT, an INSERT and END.
    assert len(run["statements"]) == 11
    assert run["latency_stddev_ms"] > 0  # from the transaction log: pgbench prints it with -P
    assert {s["t"] for s in run["seconds"]} and run["dataset_bytes"] > 0

    listed = run_cli(shared_workdir, "runs", "list", "--json")
    assert listed.code == 0
    assert json.loads(listed.stdout)[0]["id"] == run["id"]
    table = run_cli(shared_workdir, "runs", "list")
    assert "tpcb-like" in table.stdout
    shown = run_cli(shared_workdir, "runs", "show", str(run["id"]))
    assert shown.code == 0
    assert "per-statement latency" in shown.stdout and "stability" in shown.stdout
    assert "UPDATE pgbench_accounts" in shown.stdout
    assert "p50 / p90 / p99 / p99.9 / max" in shown.stdout


def test_failing_run_is_recorded_and_the_sweep_goes_on(run_cli, shared_workdir: Path, tmp_path):
    bad = tmp_path / "broken.sql"
    bad.write_text("SELECT * FROM no_such_table;\n")
    failed = run_cli(shared_workdir, "bench", "--pg-version", "18", "-f", str(bad), "-T", "1",
                     "-c", "1,2")  # fmt: skip
    assert failed.code == 1
    assert "2 of 2 runs failed" in failed.stderr
    assert "Traceback" not in failed.stderr
    listed = json.loads(run_cli(shared_workdir, "runs", "list", "--json").stdout)
    latest = [r for r in listed[:2]]
    assert all(r["status"] == "failed" for r in latest)
    detail = json.loads(run_cli(shared_workdir, "runs", "show", str(latest[0]["id"]),
                                "--json").stdout)  # fmt: skip
    assert "no_such_table" in detail["stderr"]
    # The sandbox is usable straight after.
    ok = run_cli(shared_workdir, "bench", "--pg-version", "18", "-w", "select-only", "-T", "1")
    assert ok.code == 0, ok.stderr


def test_existing_server_via_dsn(run_cli, shared_workdir: Path, cache_dir, binaries):
    """The sandbox, reached only through a connection string, stands in for a real server."""
    started = run_cli(shared_workdir, "sandbox", "start", "--pg-version", "18")
    assert started.code == 0, started.stderr
    try:
        box = open_sandbox(make_env(shared_workdir, cache_dir), binaries, lambda _m: None)
        dsn = box.conninfo() + " password=not-a-secret"
        result = run_cli(shared_workdir, "bench", "--pg-version", "18", "--dsn", dsn,
                         "-w", "select-only", "-T", "1", "--json")  # fmt: skip
        assert result.code == 0, result.stderr
        run = json.loads(result.stdout)[0]
        assert run["target"].startswith("server ")
        assert "not-a-secret" not in result.stdout
        with sqlite3.connect(shared_workdir / "results.sqlite") as db:
            dump = "\n".join(db.iterdump())
        assert "not-a-secret" not in dump
    finally:
        assert run_cli(shared_workdir, "sandbox", "stop").code == 0


def test_sandbox_status_and_destroy(run_cli, workdir: Path):
    assert "no sandbox" in run_cli(workdir, "sandbox", "status").stdout
    assert run_cli(workdir, "sandbox", "start", "--pg-version", "18", "--set",
                   "work_mem=8MB").code == 0  # fmt: skip
    status = json.loads(run_cli(workdir, "sandbox", "status", "--json").stdout)
    assert status[0]["running"] and status[0]["name"] == "pg18"
    refused = run_cli(workdir, "sandbox", "destroy")
    assert refused.code == 2 and "--yes" in refused.stderr
    declined = destroy_on_a_terminal(workdir, answer="n")
    assert declined.returncode == 0, declined.stderr
    assert "nothing was destroyed" in declined.stdout
    assert "interrupted" not in declined.stderr and declined.stderr == ""
    assert (workdir / "clusters" / "pg18").is_dir()
    assert run_cli(workdir, "sandbox", "destroy", "--yes").code == 0
    assert not (workdir / "clusters" / "pg18").exists()


def destroy_on_a_terminal(workdir: Path, answer: str) -> subprocess.CompletedProcess[str]:
    """`pgdyno sandbox destroy` with a terminal as stdin (it asks only then), answered."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode() + b"\n")
        return subprocess.run(
            [sys.executable, "-m", "pgdyno", "sandbox", "destroy", "--workdir", str(workdir)],
            stdin=terminal, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(controller)
        os.close(terminal)


def test_failed_run_view_shows_why_with_escaped_stderr(run_cli, shared_workdir: Path, tmp_path):
    """A script whose text holds terminal escapes: pgbench quotes it back in its error."""
    hostile = tmp_path / "hostile.sql"
    hostile.write_text("SELECT 1;\n\\set x \x1b]0;PWNED\x07 junk(\n")
    failed = run_cli(shared_workdir, "bench", "--pg-version", "18", "-f", str(hostile), "-T", "1")
    assert failed.code == 1, failed.stderr
    run_id = json.loads(run_cli(shared_workdir, "runs", "list", "--json").stdout)[0]["id"]
    shown = run_cli(shared_workdir, "runs", "show", str(run_id))
    assert shown.code == 0, shown.stderr
    for text in (failed.stdout, failed.stderr, shown.stdout):
        assert "\x1b" not in text and "\x07" not in text  # raw ESC / BEL never printed
    view = shown.stdout
    assert re.search(r"│ status\s+│ failed\s+│", view)
    assert re.search(r"│ reason\s+│ pgbench failed \(exit code 1\)", view)
    assert "pgbench's error output (last 3 lines)" in view
    assert "unexpected character" in view and "\\x1b]0;PWNED\\x07 junk(" in view
    assert "None" not in view


SECRET = "S3cr3t-pw"


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--dsn", f"postgresql://u:{SECRET}@[::1", "-T", "3"],
        ["doctor", "--dsn", f"postgresql://u:{SECRET}@[::1"],
        ["bench", "--dsn", f"host=db password='{SECRET} unterminated", "-T", "3"],
        ["bench", "--dsn", f"host=127.0.0.1 port=1 dbname=x password={SECRET}", "-T", "1"],
        ["doctor", "--dsn", f"postgresql://u:{SECRET}@127.0.0.1:1/x"],
        ["bench", "--dsn", "host=x", f"password={SECRET}"],  # a shell quoting slip
    ],
)
def test_no_error_shows_a_password(run_cli, workdir: Path, args):
    for traceback in ([], ["--traceback"]):
        result = run_cli(workdir, *traceback, *args)
        assert result.code in (2, 3), result.stderr
        assert SECRET not in result.stderr + result.stdout
        assert result.stderr.splitlines()[-1].startswith("pgdyno: error: ")
        assert "internal error" not in result.stderr


def test_traceback_is_a_global_option(run_cli, workdir: Path):
    before = run_cli(workdir, "--traceback", "runs", "show", "1")
    after = run_cli(workdir, "runs", "show", "1", "--traceback")
    for result in (before, after):
        assert result.code == 2
        assert "Traceback (most recent call last)" in result.stderr
        assert result.stderr.splitlines()[-1].startswith("pgdyno: error: there is no results")


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["bench", "--nonsense"], 2, "no such option"),
        (["bench", "-c", "0"], 2, "-c/--clients"),
        (["bench", "-w", "tpcb"], 2, "unknown workload 'tpcb'"),
        (["bench", "-w", "tpcc,select-only"], 2, "cannot share a matrix with pgbench's"),
        (["bench", "--tpcc-keying"], 2, "apply to the tpcc workload only"),
        (["bench", "--scale", "huge"], 2, "--scale 'huge'"),
        (["bench", "-T", "0"], 2, "-T/--time"),
        (["bench", "--jobs", "lots"], 2, "--jobs"),
        (["bench", "--pg-version", "13"], 2, "choose --pg-version from 14 to 18"),
        (["bench", "--pg-bin", "/nonexistent"], 2, "is not a directory"),
        (["bench", "--set", "work_mem"], 2, "NAME=VALUE"),
        (
            ["bench", "--pg-version", "18", "--dsn", "host=127.0.0.1 port=1 dbname=x", "-T", "1"],
            3,
            "cannot connect to PostgreSQL at 127.0.0.1:1/x",
        ),
        (["runs", "show", "999999"], 2, "there is no"),
        (["bench", "-R", "inf", "-T", "3"], 2, "'inf' is not a finite number"),
        (["bench", "-R", "nan"], 2, "'nan' is not a finite number"),
        (["bench", "-L", "1e999"], 2, "'1e999' is not a finite number"),
        (["bench", "-R", "0"], 2, "-R' / '--rate': 0 is not greater than 0"),
        (["bench", "-w", ""], 2, "-w/--workload '' names no workload: choose from"),
        (["bench", "-j", "100000", "-c", "1"], 2, "more than the largest client count (1)"),
        (["bench", "--trim", "100", "-T", "3"], 2, "--trim 100 leaves nothing of a 3 s run"),
        (["bench", "--trim", "3", "-T", "3"], 2, "--trim 3 leaves nothing"),
        (["bench", "--latency-log", "2"], 2, "choose auto, full or a sampling rate in (0, 1]"),
        (["bench", "--latency-log", "0"], 2, "choose auto, full or a sampling rate"),
        (["bench", "-T", "-1"], 2, "-T/--time -1 is not valid: it must be at least 1"),
        (["bench", "--repeats", "0"], 2, "--repeats 0 is not valid: it must be at least 1"),
        (["bench", "--warmup", "-5"], 2, "--warmup -5 is not valid: it must be at least 0"),
        (["bench", "-c", "-3"], 2, "-c/--clients '-3' needs whole numbers >= 1"),
        (["frobnicate"], 2, "no such command"),
    ],
)
def test_bad_input_gives_one_sentence(run_cli, workdir: Path, args, code, needle):
    result = run_cli(workdir, *args)
    assert result.code == code, result.stderr
    assert needle.lower() in result.stderr.lower()
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error: ")
    assert "Traceback" not in result.stderr
