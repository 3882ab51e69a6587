"""A busy host, said up front (issue 31, item 6): a process burning a CPU beside pgdyno (made
here, every time) is named before a comparison spends its budget; the foreign-CPU limit is an
option (`--foreign-cpu-limit`, the plan's `foreign_cpu_limit`); `bench`'s table marks a flagged
run as `runs list` does.

pgdyno runs as a process of its own, so the burner (a child of the test) is not one of its
descendants: it is foreign, as another user's job would be."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PGDYNO
from host_conditions import no_steal
from plans import tiny_plan

BURNER = "cpu-burner"  # the command name the busy line must show (/proc/PID/comm)

PLAN = tiny_plan("busy", foreign_cpu_limit=100)


@pytest.fixture
def burner(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process spinning on one CPU for the whole test, under a name of its own."""
    link = tmp_path / BURNER
    link.symlink_to(sys.executable)
    child = subprocess.Popen([str(link), "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        assert (Path("/proc") / str(child.pid) / "comm").read_text().strip() == BURNER
        yield child
    finally:
        child.kill()
        child.wait()


def pgdyno(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PGDYNO), *args, "--workdir", str(workdir)], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def interference(workdir: Path) -> list[dict[str, object] | None]:
    """Each stored run's interference (None when not flagged), newest first."""
    listed = pgdyno(workdir, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [row["interference"] for row in json.loads(listed.stdout)]


def flagged(workdir: Path) -> list[bool]:
    return [found is not None for found in interference(workdir)]


def steal_only(stderr: str, limit_pct: float) -> None:
    """A visible skip when the busy line came from the hypervisor's steal alone (a limit on
    foreign CPU cannot tolerate that); foreign CPU over the limit fails."""
    said = re.search(r"this host is busy: other processes took ([\d.]+)% of its CPU "
                     r"\(steal ([\d.]+)%\)", stderr)  # fmt: skip
    if said is not None:
        no_steal([{"foreign_cpu_pct": said[1], "steal_pct": said[2]}], foreign_limit_pct=limit_pct)


def test_bench_marks_a_flagged_run_and_the_limit_is_an_option(workdir: Path, burner) -> None:
    options = ("bench", "-w", "select-only", "-s", "1", "-c", "1", "-T", "2", "--warmup", "0")
    busy = pgdyno(workdir, *options)
    assert busy.returncode == 0, busy.stderr
    assert "ok (interference)" in busy.stdout, busy.stdout
    assert flagged(workdir) == [True]
    lenient = pgdyno(workdir, *options, "--foreign-cpu-limit", "100")
    assert lenient.returncode == 0, lenient.stderr
    no_steal(interference(workdir)[:1], foreign_limit_pct=100)
    assert "(interference)" not in lenient.stdout
    assert flagged(workdir) == [False, True]


def test_a_comparison_says_up_front_that_the_host_is_busy(workdir: Path, burner) -> None:
    plan = workdir / "busy.toml"
    plan.write_text(PLAN)
    # The plan tolerates anything: no busy line, no flagged run.
    tolerant = pgdyno(workdir, "compare", str(plan))
    assert tolerant.returncode == 0, tolerant.stderr
    steal_only(tolerant.stderr, 100)
    no_steal(interference(workdir), foreign_limit_pct=100)
    assert "this host is busy" not in tolerant.stderr
    assert flagged(workdir) == [False, False]
    # The option overrides the plan: said before the first run, naming the burner.
    strict = pgdyno(workdir, "compare", str(plan), "--foreign-cpu-limit", "5")
    assert strict.returncode == 0, strict.stderr
    lines = strict.stderr.splitlines()
    busy = next(i for i, line in enumerate(lines) if "this host is busy" in line)
    assert BURNER in lines[busy] and "--foreign-cpu-limit" in lines[busy]
    assert busy < next(i for i, line in enumerate(lines) if "runs planned" in line)
    assert flagged(workdir)[:2] == [True, True]
