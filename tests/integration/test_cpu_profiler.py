"""The profiler when perf refuses (a real condition made here: the process to sample is gone
before perf attaches): one line says why, no profile, nothing left behind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pgdyno.collect.cpu_profile import CpuProfiler
from pgdyno.process import pid_alive

PERF = shutil.which("perf")


@pytest.mark.skipif(PERF is None, reason="perf is not installed")
def test_a_refused_perf_is_one_line_and_no_profile(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    said: list[str] = []
    profiler = CpuProfiler(Path(str(PERF)), gone.pid, tmp_path / "run", log=said.append)
    profiler.start()
    assert profiler.stop() is None
    assert len(said) == 1 and said[0].startswith("CPU profile not taken: perf record failed: ")
    assert "No such process" in said[0], said
    assert list((tmp_path / "run").iterdir()) == []  # no data, log or FIFO left


@pytest.mark.skipif(PERF is None, reason="perf is not installed")
def test_an_interrupted_run_ends_perf_and_keeps_nothing(tmp_path: Path) -> None:
    busy = subprocess.Popen(["sleep", "30"])
    try:
        profiler = CpuProfiler(Path(str(PERF)), busy.pid, tmp_path / "run", log=print)
        profiler.start()
        perf_pid = profiler.perf_pid
        assert perf_pid is not None and pid_alive(perf_pid)
        profiler.abort()
        assert not pid_alive(perf_pid)
        assert list((tmp_path / "run").iterdir()) == []
    finally:
        busy.kill()
        busy.wait()
