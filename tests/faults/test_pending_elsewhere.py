"""Host changes left in another work directory's journal are named before anything is measured
(issue 31, item 7): `compare` refuses before its first run, not after the baseline's, and
`rollback` in this work directory names the other one.

The host is a tree of files standing for /proc and /sys (the kernel's files cannot be made to
hold a killed command's leftovers safely on a shared machine); the lock file beside it names the
other work directory's journal, as a command killed while holding it leaves it. The comparison
itself is a real one: a sandbox PostgreSQL, real pgbench.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import IS_ROOT, make_env, one_clear_sentence, run_in

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="host settings in a plan need root")

SYSCTLS = {"vm/dirty_ratio": "20\n", "vm/dirty_bytes": "0\n",
           "kernel/random/boot_id": "boot-a\n", "kernel/osrelease": "6.18.44\n"}  # fmt: skip
PLAN = """\
name = "elsewhere"
[matrix]
workloads = ["select-only"]
scales = ["small"]
clients = [1]
duration = 2
repeats = 1
[[set]]
name = "base"
[[set]]
name = "dirty"
[set.sysctl]
"vm.dirty_ratio" = 30
"""


def host_tree(root: Path) -> tuple[Path, Path]:
    proc, sys = root / "proc", root / "sys"
    for name, text in SYSCTLS.items():
        (proc / "sys" / name).parent.mkdir(parents=True, exist_ok=True)
        (proc / "sys" / name).write_text(text)
    (sys / "kernel").mkdir(parents=True)
    return proc, sys


def left_by_a_killed_command(proc: Path, workdir: Path) -> None:
    """Workdir A's journal: vm.dirty_ratio changed 20 -> 25 and not restored; the host lock file
    still names that journal."""
    workdir.mkdir()
    journal = workdir / "host-journal.jsonl"
    record = {"op": "change", "id": 1, "kind": "sysctl", "name": "vm.dirty_ratio",
              "device": None, "path": str(proc / "sys/vm/dirty_ratio"), "old": "20", "new": "25",
              "at": "2026-01-01T00:00:00.000+00:00", "pid": 1, "boot_id": "boot-a"}  # fmt: skip
    journal.write_text(json.dumps(record) + "\n")
    (proc / "sys/vm/dirty_ratio").write_text("25\n")
    (proc.parent / "pgdyno-host-settings.lock").write_text(f"pid 1, journal {journal}")


cli = run_in


def test_compare_refuses_before_any_run_and_rollback_names_the_other_work_directory(
    tmp_path: Path, workdir: Path, cache_dir: Path
) -> None:
    proc, sys = host_tree(tmp_path / "host")
    other = tmp_path / "workdir-a"
    left_by_a_killed_command(proc, other)
    env = replace(make_env(workdir, cache_dir), proc_root=proc, sys_root=sys)
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)

    code, _, stderr = cli(env, "compare", str(plan))
    line = one_clear_sentence(stderr)
    assert code == 2
    assert f"the host journal {other / 'host-journal.jsonl'} of another work directory" in line
    assert f"run `pgdyno rollback --workdir {other}` first" in line
    assert "run 1" not in stderr  # refused before the baseline's first run
    code, listed, _ = cli(env, "runs", "list", "--json")
    assert code != 0 or json.loads(listed) == []

    code, shown, stderr = cli(env, "rollback")
    assert code == 0, stderr
    assert "of another work directory holds 1 change not restored" in shown
    assert f"run `pgdyno rollback --workdir {other}`" in shown

    code, shown, stderr = cli(env, "rollback", "--workdir", str(other))
    assert code == 0, stderr
    assert (proc / "sys/vm/dirty_ratio").read_text() == "20\n"
    assert "another work directory" not in shown
