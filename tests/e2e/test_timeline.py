"""The run timeline on a real sandbox: every series on one clock, checkpoints, health."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from conftest import make_env, plain_role
from pgdyno.experiment.target import open_sandbox
from plans import tiny_plan


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


# The documented sampling rule (bench --help, --latency-log auto): the largest of these rates
# that keeps the log at no more than 1.5 x 2,000 transactions a second.
ROUND_RATES = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)
MOST_LOGGED_PER_S = 3000


def assert_rate_fits(rate: float, expected_tps: float) -> None:
    """`rate` is the largest round rate whose log stays under MOST_LOGGED_PER_S lines a second
    at `expected_tps`: the next larger one would go over it."""
    assert rate in ROUND_RATES
    assert expected_tps * rate <= MOST_LOGGED_PER_S or rate == ROUND_RATES[-1]
    larger = ROUND_RATES[ROUND_RATES.index(rate) - 1] if rate < 1.0 else None
    assert larger is None or expected_tps * larger > MOST_LOGGED_PER_S


def argv_rate(argv: list[str]) -> float:
    """pgbench's --sampling-rate in a stored argv; 1.0 (every transaction) without one."""
    rates = [float(a.split("=", 1)[1]) for a in argv if a.startswith("--sampling-rate=")]
    assert len(rates) <= 1
    return rates[0] if rates else 1.0


def run_dir(run: dict) -> Path:
    """Where pgbench wrote the run's files: the directory of its --log-prefix."""
    (prefix,) = [a.split("=", 1)[1] for a in run["pgbench_argv"] if a.startswith("--log-prefix=")]
    return Path(prefix).parent


def pgbench_figure(stdout: Path, label: str) -> float:
    """A figure of pgbench's own summary, read here ("tps = 24208.0 (without ...)")."""
    (line,) = [ln for ln in stdout.read_text().splitlines() if ln.startswith(label)]
    return float(line.removeprefix(label).split()[0])


def assert_log_follows_rate(run: dict, rate: float) -> None:
    """The transaction log pgbench kept holds `rate` of the transactions it processed (each
    is logged with that probability: within six standard deviations), all of them at 1.0."""
    folder = run_dir(run)
    processed = int(pgbench_figure(folder / "pgbench.stdout",
                                   "number of transactions actually processed:"))  # fmt: skip
    assert run["transactions"] == processed
    lines = sum(len(f.read_text().splitlines()) for f in folder.glob("tx.*"))
    if rate == 1.0:
        assert lines == processed
    else:
        spread = 6 * (processed * rate * (1 - rate)) ** 0.5
        assert abs(lines - processed * rate) <= spread + 1, (lines, processed, rate)
    shown = "every transaction" if rate == 1.0 else f"sampled: {rate * 100:g}% of transactions"
    assert run["latency_source"] == shown


def test_second_run_sizes_its_latency_log_from_the_first(run_cli, shared_workdir: Path):
    """The sampling rate of a run follows from the TPS of the last run like it, whatever the
    machine's speed: no probe, the rule of --latency-log auto, a log that matches the rate."""
    args = ["bench", "--pg-version", "18", "-w", "select-only", "-c", "2", "-T", "3", "--json",
            "--keep-logs"]  # fmt: skip
    first = json.loads(run_cli(shared_workdir, *args).stdout)[0]
    run = json.loads(run_cli(shared_workdir, *args).stdout)[0]
    assert not (run_dir(run) / "probe").exists()  # sized from the first run, not a probe
    rate = argv_rate(run["pgbench_argv"])
    assert_rate_fits(rate, first["tps"])
    assert_log_follows_rate(run, rate)
    assert run["latency_p99_ms"] is not None


def test_a_given_sampling_rate_is_what_pgbench_logs(run_cli, shared_workdir: Path):
    """--latency-log 0.05: pgbench is told so and keeps about a twentieth of its transactions,
    at any speed."""
    result = run_cli(
        shared_workdir, "bench", "--pg-version", "18", "-w", "select-only", "-c", "2", "-T", "3",
        "--latency-log", "0.05", "--keep-logs", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (run,) = json.loads(result.stdout)
    assert "--sampling-rate=0.05" in run["pgbench_argv"]
    assert_log_follows_rate(run, 0.05)


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


def test_first_run_is_sized_by_a_probe(run_cli, workdir: Path):
    """A fresh results database, no warm-up: a 3 s probe measures the rate first, and the
    run's latency sample is sized from the probe's TPS (pgbench's own figure, read here)."""
    result = run_cli(
        workdir, "bench", "--pg-version", "18", "-w", "select-only", "-c", "2", "-T", "3",
        "--keep-logs", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (run,) = json.loads(result.stdout)
    probe = run_dir(run) / "probe" / "pgbench.stdout"
    assert pgbench_figure(probe, "duration:") == 3
    rate = argv_rate(run["pgbench_argv"])
    assert_rate_fits(rate, pgbench_figure(probe, "tps ="))
    assert_log_follows_rate(run, rate)


def test_a_compare_probes_once_and_never_longer_than_its_runs(run_cli, workdir: Path):
    """The rate of a compare's first run sizes the others: its second set and a second compare
    of the plan find it (they were once looked up under the server's name while a compare's
    runs are stored under the plan's, so every run probed); a probe lasts at most a run."""
    plan = workdir / "probe.toml"
    plan.write_text(tiny_plan("probe", head={"baseline": "a"}))
    for _ in range(2):
        result = run_cli(workdir, "compare", str(plan), "--keep-files")
        assert result.code == 0, result.stderr
    probes = sorted(workdir.glob("runs/session-*/run-*/probe/pgbench.stdout"))
    assert [p.parent.parent.parent.name for p in probes] == ["session-1"], probes
    assert pgbench_figure(probes[0], "duration:") == 2  # the run's 2 s, not PROBE_S
