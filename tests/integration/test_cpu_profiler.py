"""The profiler on real processes: sampling every CPU, it keeps the samples of the server's
processes only; when perf refuses (a real condition made here: following processes, the one to
sample is gone before perf attaches) one line says why, no profile, nothing left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from pgdyno.collect.cpu_profile import CpuProfiler
from pgdyno.host.perf import every_cpu_allowed
from pgdyno.process import pid_alive

PERF = shutil.which("perf")


@pytest.mark.skipif(PERF is None, reason="perf is not installed")
def test_a_refused_perf_is_one_line_and_no_profile(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    said: list[str] = []
    profiler = CpuProfiler(
        Path(str(PERF)), gone.pid, tmp_path / "run", every_cpu=False, log=said.append
    )
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


SPIN = ["sh", "-c", "while :; do :; done"]


@pytest.mark.skipif(PERF is None, reason="perf is not installed")
@pytest.mark.skipif(
    not every_cpu_allowed(Path("/proc"), os.geteuid()),
    reason="sampling every CPU needs root or kernel.perf_event_paranoid <= 0",
)
def test_sampling_every_cpu_keeps_the_servers_processes_only(tmp_path: Path) -> None:
    """Two busy processes, one of them the 'server': its samples are kept, the other's (as
    pgbench's would be) are not, though perf sampled every CPU."""
    server, other = subprocess.Popen(SPIN), subprocess.Popen(SPIN)
    try:
        said: list[str] = []
        profiler = CpuProfiler(Path(str(PERF)), server.pid, tmp_path / "run", log=said.append)
        assert profiler.every_cpu
        profiler.start()
        time.sleep(1.5)
        found = profiler.stop()
        assert said == [] and found is not None
        assert found.samples and {s.pid for s in found.samples} == {server.pid}
        assert found.types == {server.pid: "postmaster"}
        assert list((tmp_path / "run").iterdir()) == []
    finally:
        for spinning in (server, other):
            spinning.kill()
            spinning.wait()
