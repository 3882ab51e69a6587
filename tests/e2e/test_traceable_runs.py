"""A comparison's runs traced back to it (issue 31, item 6): the set's name in the progress
lines, `runs list` (filtered by `--comparison`) and `runs show`; the session and comparison said
up front; the dataset said once per command, with what was done to it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from plans import tiny_plan

PLAN = tiny_plan("trace", [("base", {}), ("more-mem", {"work_mem": "8MB"})], repeats=2)


def test_a_comparisons_runs_carry_its_id_and_their_sets_everywhere(run_cli, workdir: Path):
    bench = run_cli(workdir, "bench", "-w", "select-only", "-s", "1", "-c", "1", "-T", "2",
                    "--warmup", "0", "--pg-version", "18")  # fmt: skip
    assert bench.code == 0, bench.stderr
    plan = workdir / "trace.toml"
    plan.write_text(PLAN)
    done = run_cli(workdir, "compare", str(plan))
    assert done.code == 0, done.stderr
    said = re.search(r"comparison (\d+) \(session (\d+)\)", done.stderr)
    assert said, done.stderr
    comparison = int(said.group(1))
    progress = [line for line in done.stderr.splitlines() if re.match(r"run \d+ \(", line)]
    assert len(progress) == 4
    assert sorted(re.search(r"set ([a-z-]+),", line).group(1) for line in progress) == [
        "base",
        "base",
        "more-mem",
        "more-mem",
    ]
    dataset_lines = [
        line for line in done.stderr.splitlines() if "dataset pgbench scale 1:" in line
    ]
    assert len(dataset_lines) == 1 and re.search(r": (generated|reused) \(", dataset_lines[0])
    assert "reusing or generating" not in done.stderr + bench.stderr

    listed = run_cli(workdir, "runs", "list", "--comparison", str(comparison), "--json")
    assert listed.code == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == 4 and {r["comparison_id"] for r in rows} == {comparison}
    assert sorted(r["set_name"] for r in rows) == ["base", "base", "more-mem", "more-mem"]
    table = run_cli(workdir, "runs", "list")
    assert f"{comparison}: more-mem" in table.stdout and "comparison: set" in table.stdout
    shown = run_cli(workdir, "runs", "show", str(rows[0]["id"]))
    expected = rf"comparison\s+│\s+{comparison}, set {rows[0]['set_name']}"
    assert re.search(expected, shown.stdout), shown.stdout
    # Settings as SHOW prints them, not pg_settings' raw "16384 8kB".
    assert "shared_buffers=128MB" in shown.stdout and " 8kB" not in shown.stdout
