"""Every `--json` output parses with a strict parser: no bare NaN or Infinity, ever.

Python's json module writes and reads NaN/Infinity by default; JavaScript, jq, Go and most other
parsers reject them. The parser below refuses them, so a command that writes one fails here.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Result, make_env, run_in
from plans import tiny_plan


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} in JSON output")


def strict(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)


PLAN = tiny_plan("strict-json", duration=1, rate=400.5, latency_limit=50.0)

Run = Callable[..., Result]


@pytest.fixture(scope="module")
def cli(shared_workdir: Path, cache_dir: Path) -> Run:
    def run(*args: str, workdir: Path = shared_workdir) -> Result:
        return run_in(make_env(workdir, cache_dir), *args)

    return run


@pytest.fixture(scope="module")
def outputs(cli: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Each JSON-printing command once, on data that holds rates, limits and failed runs."""
    tmp = tmp_path_factory.mktemp("strict-json")
    plan = tmp / "plan.toml"
    plan.write_text(textwrap.dedent(PLAN))
    broken = tmp / "broken.sql"
    broken.write_text("SELECT * FROM no_such_table;\n")
    snapshot = tmp / "snapshot.json"
    found: dict[str, tuple[int, str]] = {}

    def keep(name: str, *args: str) -> None:
        code, stdout, stderr = cli(*args)
        assert code in (0, 1), (name, stderr)
        found[name] = (code, stdout)

    keep("bench", "bench", "--pg-version", "18", "-w", "select-only", "-T", "1", "-R", "300.5",
         "-L", "40", "--json")  # fmt: skip
    keep("bench failed", "bench", "--pg-version", "18", "-f", str(broken), "-T", "1", "--json")
    run_id = strict(found["bench"][1])[0]["id"]
    keep("runs list", "runs", "list", "--json")
    keep("runs show", "runs", "show", str(run_id), "--json")
    keep("runs show failed", "runs", "show", str(strict(found["bench failed"][1])[0]["id"]),
         "--json")  # fmt: skip
    keep("compare", "compare", str(plan), "--json")
    keep("report", "report", "--last", "--json")
    keep("report runs", "report", str(run_id), "--json", "-o", str(tmp / "r2.json"))
    found["report runs"] = (found["report runs"][0], (tmp / "r2.json").read_text())
    keep("doctor", "doctor", "--fail-on", "never", "--json", "--snapshot", str(snapshot))
    keep("doctor sandbox", "doctor", "--sandbox", "--pg-version", "18", "--fail-on", "never",
         "--json")  # fmt: skip
    keep("doctor from", "doctor", "--from", str(snapshot), "--fail-on", "never", "--json")
    found["snapshot file"] = (0, snapshot.read_text())  # written by --snapshot
    keep("sandbox status", "sandbox", "status", "--json")
    keep("pg versions", "pg", "versions", "--json")
    return found


NAMES = [
    "bench", "bench failed", "runs list", "runs show", "runs show failed", "compare", "report",
    "report runs", "doctor", "doctor sandbox", "doctor from", "snapshot file", "sandbox status",
    "pg versions",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_json_output_is_strict(outputs: dict[str, tuple[int, str]], name: str):
    _code, stdout = outputs[name]
    data = strict(stdout)
    assert data not in (None, [], {}), f"{name} printed no data"


def test_rates_come_back_as_numbers(outputs: dict[str, tuple[int, str]]):
    run = strict(outputs["runs show"][1])
    assert run["rate"] == 300.5


def test_a_stored_infinity_is_never_written_bare(
    cli: Run, outputs: dict[str, tuple[int, str]], shared_workdir: Path, tmp_path: Path
):
    """A results database from before non-finite input was refused may hold inf."""
    copy = tmp_path / "old.sqlite"
    shutil.copy(shared_workdir / "results.sqlite", copy)
    with sqlite3.connect(copy) as db:
        run_id = db.execute("SELECT max(id) FROM runs").fetchone()[0]
        db.execute("UPDATE runs SET rate = 9e999 WHERE id = ?", (run_id,))
    for args in (("runs", "list"), ("runs", "show", str(run_id))):
        code, stdout, stderr = cli(*args, "--json", "--results", str(copy))
        assert "Infinity" not in stdout and "NaN" not in stdout
        if code == 0:
            strict(stdout)
        else:
            lines = stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), stderr
            assert "internal error" not in stderr


def test_a_snapshot_with_nan_is_refused(cli: Run, tmp_path: Path):
    snapshot = tmp_path / "nan.json"
    snapshot.write_text('{"format": "pgdyno-doctor/1", "host": {"cpu_count": NaN}}')
    code, stdout, stderr = cli("doctor", "--from", str(snapshot), "--json", workdir=tmp_path)
    assert code == 2 and stdout == ""
    assert stderr.startswith("pgdyno: error: ") and "is not a JSON file" in stderr


@pytest.mark.parametrize("option", ["-R", "-L"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity", "1e400"])
def test_non_finite_numbers_are_refused_at_input(cli: Run, tmp_path: Path, option, value):
    code, stdout, stderr = cli("bench", option, value, "-T", "3", workdir=tmp_path)
    assert code == 2 and stdout == ""
    assert "is not a finite number" in stderr and len(stderr.splitlines()) == 1
    assert not (tmp_path / "results.sqlite").exists()  # refused before anything was made
