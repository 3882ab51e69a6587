"""The compare use case (pgdyno.lab.compare) on a real sandbox and real pgbench: the comparison
is settled before the first run and judged on the runs the loop kept in memory, which are the
runs the store holds."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from conftest import make_env
from pgdyno.cli.progress import MatrixProgress
from pgdyno.lab.compare import CompareRequest, execute_compare
from pgdyno.plan.load import load_plan
from pgdyno.plan.policy import Allowed
from pgdyno.stats.analysis import Judging, analyse

PLAN = """name = "lab"
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = 2
repeats = 2
warmup = 0

[[set]]
name = "a"
[set.pg]
work_mem = "8MB"

[[set]]
name = "b"
[set.pg]
work_mem = "16MB"
"""


def test_the_comparison_is_judged_on_the_runs_kept_in_memory(
    workdir: Path, cache_dir: Path, tmp_path: Path
) -> None:
    env = make_env(workdir, cache_dir)
    path = tmp_path / "lab.toml"
    path.write_text(PLAN)
    said: list[str] = []
    done = execute_compare(
        env, CompareRequest(load_plan(path), Allowed.of((), ()), seed=3), log=said.append,
        progress=lambda: MatrixProgress(Console(file=io.StringIO())),
    )  # fmt: skip
    stored = done.runs
    assert len(stored) == 4 and all(r.status == "ok" for r in stored)
    assert done.outcome.outcomes == tuple(stored)  # in memory: the runs as stored
    judged = analyse(stored, ["a", "b"], "a", "sets", Judging(sequential=False))
    assert done.analysis.as_dict() == judged.as_dict()
    assert done.info.scales == (1,)
    # Scales and the comparison are said before any run was made (nothing learnt later).
    settled = next(i for i, line in enumerate(said) if line.startswith("comparison "))
    assert any("scale 1" in line for line in said[:settled])
    assert done.outcome.rounds.orders == [["a", "b"], ["b", "a"]]  # balanced, seed 3: a first
    assert any(line.startswith("orders: balanced design") and "seed 3" in line for line in said)
