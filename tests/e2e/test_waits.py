"""The wait-event profile as a user meets it (issue 24's acceptance): `bench`, then `runs show
--waits`, `--json` and `--csv`; a comparison of synchronous_commit on against off names the WAL
flush wait among the events whose share fell most."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from host_conditions import no_steal, quiet_pgdyno

PLAN = """\
name = "sync-commit"
[matrix]
workloads = ["tpcb-like"]
scales = [1]
clients = [4]
duration = 5
warmup = 0
repeats = 1
[[set]]
name = "on"
[set.pg]
synchronous_commit = "on"
[[set]]
name = "off"
[set.pg]
synchronous_commit = "off"
"""
WAL_FLUSH = {"IO:WalSync", "LWLock:WALWrite"}


def test_bench_then_runs_show_waits_json_and_csv(run_cli, shared_workdir: Path) -> None:
    done = run_cli(shared_workdir, "bench", "--pg-version", "18", "-w", "tpcb-like", "-c", "4",
                   "-T", "5", "--json")  # fmt: skip
    assert done.code == 0, done.stderr
    run_id = str(json.loads(done.stdout)[0]["id"])
    shown = run_cli(shared_workdir, "runs", "show", run_id, "--waits")
    assert shown.code == 0, shown.stderr
    assert "pg_stat_activity at 10 Hz" in shown.stdout
    top = shown.stdout.split("by wait type")[0]
    rows = dict(re.findall(r"│ (\S[^│]*?) +│ +([0-9.]+) │", top))
    # the legend says what CPU* is even when no sample of this short run was on CPU (which
    # rows a 5 s run samples is chance: CI once saw only lock and WAL waits in its 40 samples)
    assert "CPU*: active with no wait event" in shown.stdout
    # one decimal each: the rounding of n rows is at most n * 0.05 points
    assert sum(map(float, rows.values())) == pytest.approx(100.0, abs=0.05 * len(rows) + 1e-9)

    waits = json.loads(run_cli(shared_workdir, "runs", "show", run_id, "--json").stdout)["waits"]
    assert waits["source"] == "pg_stat_activity" and waits["sample_hz"] == 10
    assert waits["samples"] >= 10 and waits["db_time_s"] > 0
    assert sum(waits["by_type"].values()) == pytest.approx(1.0)
    assert sum(w["share"] for w in waits["top"]) + waits["other"] == pytest.approx(1.0)
    # the table shows the stored top events, in their order
    assert list(rows) == [w["event"] for w in waits["top"]][: len(rows)], shown.stdout
    table = run_cli(shared_workdir, "runs", "show", run_id, "--csv").stdout
    header = next(csv.reader(io.StringIO(table)))
    assert {f"waits.{t}_aas" for t in waits["by_type"]} <= set(header)
    top = {f"waits_event.{w['event']}_aas" for w in waits["top"][:5]}
    assert top == {name for name in header if name.startswith("waits_event.")}

    doctor = run_cli(shared_workdir, "doctor", "--sandbox", "--pg-version", "18", "--json",
                     "--fail-on", "never")  # fmt: skip
    assert doctor.code == 0, doctor.stderr
    cited = json.loads(doctor.stdout)["waits"]
    assert cited["run"] == int(run_id)
    assert {e["event"] for e in cited["events"]} <= {w["event"] for w in waits["top"]}
    assert all(e["share"] >= 0.1 for e in cited["events"])

    off = run_cli(shared_workdir, "bench", "--pg-version", "18", "-w", "select-only", "-T", "1",
                  "--wait-sample-hz", "0", "--json")  # fmt: skip
    assert off.code == 0, off.stderr
    off_id = str(json.loads(off.stdout)[0]["id"])
    refused = run_cli(shared_workdir, "runs", "show", off_id, "--waits")
    assert refused.code == 2 and "has no wait profile" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_synchronous_commit_off_takes_the_wal_flush_wait_away(
    quiet_workdir: Path, tmp_path: Path
) -> None:
    """In a PID namespace of its own pgdyno sees no foreign CPU, so no run is discarded for
    interference and every run's profile counts, on a busy host as on a quiet one."""
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    done = quiet_pgdyno(quiet_workdir, "compare", str(plan), "--json")
    assert done.code == 0, done.stderr
    data = json.loads(done.stdout)
    no_steal([r["interference"] for r in data["runs"]])
    assert all(r["waits"] is not None for r in data["runs"])
    off = next(r for r in data["analysis"]["results"] if r["set_name"] == "off")
    changes = off["wait_changes"]
    assert 1 <= len(changes) <= 3
    fell = {c["event"] for c in changes if c["after"] < c["before"]}
    assert fell & WAL_FLUSH, changes
