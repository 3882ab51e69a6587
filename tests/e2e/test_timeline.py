"""The run timeline on a real sandbox: every series on one clock, checkpoints, health."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from conftest import make_env, plain_role
from pgdyno.collect.timeline import latency_source, sampling_rate
from pgdyno.experiment.target import open_sandbox


def test_tpcb_run_has_a_full_timeline(run_cli, shared_workdir: Path):
    result = run_cli(
        shared_workdir, "bench", "--pg-version", "18", "-w", "tpcb-like", "-c", "2", "-T", "12",
        "--set", "checkpoint_timeout=30s", "--set", "max_wal_size=32MB", "--pgbench-progress",
        "--latency-log", "full", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    run = json.loads(result.stdout)[0]
    seconds = run["seconds"]
    assert len(seconds) >= 10
    for row in seconds:
        assert row["tps"] > 0
        assert row["latency_p50_ms"] <= row["latency_p99_ms"] <= row["latency_max_ms"]
        assert row["logged"] == row["tps"]  # every transaction logged: the count is exact
    # Whole seconds only, so they hold fewer transactions than pgbench counted in the run ...
    assert sum(r["tps"] for r in seconds) <= run["summary"]["transactions"]
    # ... and agree with pgbench's own -P 1 report: its intervals start at pgbench's start, not
    # at the top of a second, so over the same seconds the sums differ by at most one second.
    progress = {int(t): v for t, v in run["samples"]["pgbench.progress_tps"].items()}
    common = [r for r in seconds if r["t"] in progress]
    assert len(common) >= len(seconds) - 2
    logged_sum = sum(r["tps"] for r in common)
    progress_sum = sum(progress[r["t"]] for r in common)
    assert abs(logged_sum - progress_sum) <= 1.5 * max(r["tps"] for r in common)
    assert run["latency_source"] == "every transaction"
    assert run["latency_p50_ms"] <= run["latency_p99_ms"] <= run["latency_max_ms"]

    samples = run["samples"]
    data = run["devices"]["data"]["name"]
    for metric in (
        "cpu.user_pct", "cpu.system_pct", "cpu.iowait_pct", "cpu.idle_pct",
        f"disk.{data}.write_mbps", f"disk.{data}.read_mbps", "mem.dirty_mb",
        "mem.writeback_mb", "pg.buffers_checkpoint_per_s", "pg.buffers_bgwriter_per_s",
        "pg.buffers_backend_per_s", "pg.wal_bytes_per_s", "client.cpu_pct",
    ):  # fmt: skip
        assert metric in samples, metric
        assert len(samples[metric]) >= 10, metric
    ticks = {int(t) for t in samples["cpu.user_pct"]}
    overlap = ticks & {row["t"] for row in seconds}
    assert len(overlap) >= len(seconds) - 2  # one clock for pgbench and the samplers
    assert sum(samples["pg.wal_bytes_per_s"].values()) > 1e6
    kinds = {e["kind"] for e in run["events"]}
    assert {"checkpoint_start", "checkpoint_complete"} <= kinds
    complete = next(e for e in run["events"] if e["kind"] == "checkpoint_complete")
    assert complete["detail"]["buffers"] >= 0 and complete["detail"]["total_s"] >= 0
    health = run["health"]
    assert health["measured_s"] >= 8 and health["tps_cv_pct"] is not None
    assert health["client_cpu_pct"] is not None and health["client_cpu_pct"] > 0

    table = run_cli(shared_workdir, "runs", "show", str(run["id"]), "--timeline")
    assert table.code == 0 and "p99 ms" in table.stdout and "C>" in table.stdout
    exported = run_cli(shared_workdir, "runs", "show", str(run["id"]), "--csv")
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(rows) >= len(seconds)
    assert {"tps", "latency_p99_ms", "cpu.iowait_pct", "pg.wal_bytes_per_s"} <= set(rows[0])


def test_second_run_sizes_its_latency_log_from_the_first(run_cli, shared_workdir: Path):
    """The sampling rate of a run follows from the TPS of the last run like it."""
    args = ["bench", "--pg-version", "18", "-w", "select-only", "-c", "2", "-T", "3", "--json"]
    first = json.loads(run_cli(shared_workdir, *args).stdout)[0]
    run = json.loads(run_cli(shared_workdir, *args).stdout)[0]
    rate = sampling_rate(first["tps"])
    assert run["latency_source"] == latency_source(rate)
    assert (f"--sampling-rate={rate:g}" in run["pgbench_argv"]) == (rate < 1.0)
    assert rate < 1.0 or first["tps"] < 3000  # select-only on 2 clients is fast enough here
    assert run["latency_p99_ms"] is not None


def test_unprivileged_role_on_an_existing_server(run_cli, workdir: Path, cache_dir, binaries):
    """No superuser, no pg_monitor: a run is still produced, with a note of what is missing."""
    assert run_cli(workdir, "sandbox", "start", "--pg-version", "18").code == 0
    try:
        box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
        dsn = plain_role(box, "bencher", "CREATEDB")
        result = run_cli(workdir, "bench", "--pg-version", "18", "--dsn", dsn,
                         "-w", "select-only", "-T", "2", "--json")  # fmt: skip
        assert result.code == 0, result.stderr
        run = json.loads(result.stdout)[0]
        assert run["status"] == "ok" and run["tps"] > 0
        assert run["latency_p99_ms"] is not None
        assert "cpu.user_pct" in run["samples"]
        assert "not collected" in result.stderr  # says what a plain role cannot see
    finally:
        assert run_cli(workdir, "sandbox", "stop").code == 0


def test_first_fast_run_is_sampled_after_a_probe(run_cli, workdir: Path):
    """A fresh results database, no warm-up: a 3 s probe sizes the latency sample, so a
    select-only run at tens of thousands of TPS does not log every transaction."""
    result = run_cli(
        workdir, "bench", "--pg-version", "18", "-w", "select-only", "-c", "2", "-T", "3",
        "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (run,) = json.loads(result.stdout)
    assert run["tps"] > 3000  # fast enough that logging all of it would be sampled away
    assert run["latency_source"].startswith("sampled: ")
    assert "--sampling-rate=" in " ".join(run["pgbench_argv"])
