"""The timeline sampler loses a source, or hangs, mid-run: the run is flagged, not just cut.

Before: an exception outside the sampler's per-source guards killed its thread silently, and a
sampler stuck in a read was abandoned after 10 s without a word; either way the run was stored
with a truncated timeline and nothing said so. Now `runs show` (table and --json) carries a
health warning and a log line says it at once.

Real faults, no patched code: pgdyno's /proc root (the Environment's `proc_root`) is a copy of
the live files, and mid-run a file of the copy turns to garbage (a counter too large for a
float, which used to kill the thread) or into a FIFO nobody writes (a read that never returns).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, Result, wait_for
from pgdyno.cli import main
from pgdyno.environment import Environment, ResultsLocation
from pgdyno.process import pid_cmdline

pytestmark = pytest.mark.slow
SECONDS = 8  # the measured run

COPIED = ("stat", "meminfo", "cpuinfo", "diskstats", "vmstat", "loadavg", "self/mountinfo",
          "sys/kernel/osrelease", "pressure/cpu", "pressure/io", "pressure/memory")  # fmt: skip


@pytest.fixture
def proc_copy(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "proc"
    for name in COPIED:
        source = Path("/proc") / name
        try:
            text = source.read_bytes()
        except OSError:
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text)
    yield root
    stat = root / "stat"
    if stat.is_fifo():
        release(stat)  # a sampler still blocked on it reads end-of-file and finishes
    shutil.rmtree(root, ignore_errors=True)


def release(fifo: Path) -> None:
    with contextlib.suppress(OSError):  # ENXIO: nobody has it open for reading
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def measuring(workdir: Path) -> bool:
    """True while the measured pgbench runs (-T 8, not the 3 s probe that sizes its log)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            mine = bool(cmd) and cmd[0].endswith("pgbench") and str(workdir) in str(cmd)
            if mine and ("-T", str(SECONDS)) in itertools.pairwise(cmd):
                return True
    return False


def bench_while(
    workdir: Path, cache_dir: Path, proc_root: Path, fault: Callable[[], None]
) -> Result:
    """`pgdyno bench` in-process (in a thread) with `proc_root`; `fault` 3 s into the run."""
    env = Environment(
        data_dir=workdir, cache_dir=cache_dir, results=ResultsLocation(workdir / "results.sqlite"),
        env=dict(os.environ), stdout=io.StringIO(), stderr=io.StringIO(), proc_root=proc_root,
        is_root=IS_ROOT,
    )  # fmt: skip
    args = ["bench", "--pg-version", "18", "-w", "select-only", "-s", "1", "-T", str(SECONDS)]
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main(args, env)))
    thread.start()
    try:
        assert wait_for(lambda: measuring(workdir), timeout=240), "pgbench never ran"
        time.sleep(3)  # a few samples of every series first
        fault()
    finally:
        thread.join(timeout=300)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return Result(codes[0], env.stdout.getvalue(), env.stderr.getvalue())


def shown(run_cli, workdir: Path) -> tuple[dict, str]:
    as_json = run_cli(workdir, "runs", "show", "1", "--json")
    table = run_cli(workdir, "runs", "show", "1")
    assert as_json.code == 0 and table.code == 0, as_json.stderr + table.stderr
    return json.loads(as_json.stdout), table.stdout


def last_second(run: dict, metric: str) -> int:
    return max(int(t) for t in run["samples"][metric])


def test_garbage_proc_file_flags_the_run(workdir: Path, cache_dir: Path, proc_copy: Path,
                                         run_cli):  # fmt: skip
    def garbage() -> None:  # parses as a number, but no float can hold it
        (proc_copy / "meminfo").write_text("MemTotal: 1 kB\nMemFree: " + "9" * 400 + " kB\n")

    result = bench_while(workdir, cache_dir, proc_copy, garbage)
    assert result.code == 0, result.stderr
    assert "OS sampling stopped:" in result.stderr  # said at once, in the log

    run, table = shown(run_cli, workdir)
    assert run["status"] == "ok"
    warnings = [w for w in run["health"]["warnings"] if w.startswith("OS sampling stopped ")]
    assert len(warnings) == 1 and warnings[0].endswith("its series end there"), warnings
    assert "OS sampling stopped" in table
    # The OS series really do end early; pgbench's own per-second rows go on.
    assert last_second(run, "cpu.user_pct") < max(row["t"] for row in run["seconds"])


def test_hung_sampler_flags_the_run(workdir: Path, cache_dir: Path, proc_copy: Path, run_cli):
    def fifo() -> None:  # the next read of /proc/stat never returns
        (proc_copy / "stat").unlink()
        os.mkfifo(proc_copy / "stat")

    result = bench_while(workdir, cache_dir, proc_copy, fifo)
    assert result.code == 0, result.stderr
    assert "the timeline sampler hung" in result.stderr

    run, table = shown(run_cli, workdir)
    assert run["status"] == "ok"
    assert any(w.startswith("the timeline sampler hung") for w in run["health"]["warnings"])
    assert "the timeline sampler hung" in table
