"""The on-CPU profiler: perf sampling the server's processes over a run (host/perf.py).

Started before pgbench and stopped after it, it samples every CPU (as root: far cheaper than
following the server's processes, host/perf.py says why) and keeps the samples of the server's
processes: the postmaster and its children (backends, checkpointer, walwriter, background
writer, autovacuum, I/O workers). A thread reads the postmaster's children once a second and
keeps each one's title, so each sample's pid is given its process type even when the process
ended before the run did; a child that came and went between two looks is not counted.
Without root (and kernel.perf_event_paranoid above 0) perf follows the postmaster and its
children instead (`-p`), whose backends forked later inherit the sampling.

On by default (`wanted`); anything that stops perf from sampling (not installed, not
permitted, a server on another host) is one line in the log and the run goes on without a
profile.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pgdyno.environment import CPU_PROFILE_ENV
from pgdyno.errors import ProcessError
from pgdyno.host import perf
from pgdyno.records.profile import CpuSample

TITLE_POLL_S = 1.0
START_TRIES = 3
DATA_FILE = "perf.data"
LOG_FILE = "perf.log"


@dataclass(frozen=True)
class ProfileData:
    """What one profiled run left: perf's samples and each pid's process type."""

    samples: tuple[CpuSample, ...]
    types: Mapping[int, str]
    sample_hz: int


def wanted(asked: bool | None, env: Mapping[str, str]) -> bool:
    """Whether to profile the server's CPU: as asked, else on unless the environment turns the
    default off.

    >>> off = {CPU_PROFILE_ENV: "off"}
    >>> wanted(None, {}), wanted(None, off), wanted(True, off), wanted(False, {})
    (True, False, True, False)
    """
    if asked is not None:
        return asked
    return env.get(CPU_PROFILE_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


def unavailable(env: Mapping[str, str], server_pid: int | None, remote: bool) -> str | None:
    """Why no CPU profile can be taken in this session, as one log line; None when perf can be
    tried (whether the kernel permits it shows when it starts)."""
    if remote:
        return "CPU profile not taken: perf runs on this host only, not over --ssh"
    if server_pid is None:
        return "CPU profile not taken: the server's postmaster is not a process of this host"
    if perf.find_perf(env) is None:
        return f"CPU profile not taken: perf is not installed; {perf.INSTALL_HINT}"
    return None


class CpuProfiler:
    """perf record over one run: `start()` before pgbench, `stop()` after it."""

    def __init__(
        self,
        binary: Path,
        postmaster: int,
        run_dir: Path,
        *,
        proc_root: Path = Path("/proc"),
        hz: int = perf.DEFAULT_HZ,
        every_cpu: bool | None = None,
        log: Callable[[str], None],
    ) -> None:
        self.binary, self.postmaster, self.run_dir = binary, postmaster, run_dir
        self.proc_root, self.hz, self.log = proc_root, hz, log
        self.types: dict[int, str] = {}
        self._perf: perf.PerfRecord | None = None
        self._log_file: IO[str] | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._enabled = False
        # Every CPU when permitted (None: as the permissions allow), else `-p`.
        self.every_cpu = (
            perf.every_cpu_allowed(proc_root, os.geteuid()) if every_cpu is None else every_cpu
        )

    @property
    def data(self) -> Path:
        return self.run_dir / DATA_FILE

    def _look(self) -> list[int]:
        """Read the postmaster's children and file the titles of those not seen yet."""
        pids = perf.children(self.proc_root, self.postmaster)
        for pid in pids:
            if pid not in self.types:
                found = perf.title(self.proc_root, pid)
                if found:
                    self.types[pid] = perf.process_type(found)
        return pids

    def _poll(self) -> None:
        while not self._stop.wait(TITLE_POLL_S):
            self._look()

    def start(self) -> None:
        """perf started and sampling (or, said in the log, not).

        Following processes (`-p`), perf refuses a pid list with a process that ended before
        it attached ("No such process": an autovacuum worker comes and goes), so a refused
        start is tried again with the children then running, up to START_TRIES times."""
        self.types[self.postmaster] = perf.POSTMASTER
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = (self.run_dir / LOG_FILE).open("w")
        for _ in range(START_TRIES):
            pids = [self.postmaster, *self._look()]
            follow = None if self.every_cpu else pids
            try:
                self._perf = perf.PerfRecord(
                    self.binary, follow, self.hz, self.data, self._log_file
                )
            except (ProcessError, OSError) as exc:
                self.log(f"CPU profile not taken: {exc}")
                return
            self._enabled = self._perf.enable()
            if self._enabled or self._perf.child.poll() is None:
                break
            self._perf.stop(grace=1.0)  # refused: reaped, its FIFOs removed
        self._poller = threading.Thread(target=self._poll, name="pgdyno-perf-titles", daemon=True)
        self._poller.start()

    @property
    def perf_pid(self) -> int | None:
        """perf record's pid while it runs; None when it did not start."""
        return None if self._perf is None else self._perf.child.pid

    def perf_cpu_s(self) -> float | None:
        """The CPU time perf record has used so far (benchmarks/profile_cost.py)."""
        pid = self.perf_pid
        return None if pid is None else perf.cpu_seconds(self.proc_root, pid)

    def _stopped(self) -> str | None:
        """perf stopped and its file written, the title thread ended; why there is no
        profile, or None."""
        recording = self._perf
        if recording is not None:
            self._look()  # the children at the end too, before their last samples are read
        # perf that ended by itself was refused or failed
        early = recording.stop(grace=30.0) if recording is not None else None
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
        if self._log_file is not None:
            self._log_file.close()
        if recording is None:
            return "perf did not start"
        said = (self.run_dir / LOG_FILE).read_text(errors="replace")
        if early is not None or not self.data.exists():
            return f"perf record failed: {_last(said)}"
        if not self._enabled:
            return "perf record did not start sampling in time"
        return None

    def abort(self) -> None:
        """perf ended and its files removed, its samples not read (a run that did not end
        well keeps no profile)."""
        self._stopped()
        self.data.unlink(missing_ok=True)
        (self.run_dir / LOG_FILE).unlink(missing_ok=True)

    def stop(self, *, keep_files: bool = False) -> ProfileData | None:
        """perf stopped and its samples read; None (said in the log) when there are none."""
        try:
            problem = self._stopped()
            if self._perf is None:  # its start said why
                return None
            if problem is None:
                # Sampling every CPU: the server's processes only (the others are pgbench,
                # pgdyno, other servers, idle CPUs).
                only = list(self.types) if self.every_cpu else None
                samples = perf.parse_script(perf.script(self.binary, self.data, only))
                return ProfileData(samples, dict(self.types), self.hz)
            self.log(f"CPU profile not taken: {problem}")
            return None
        except ProcessError as exc:
            self.log(f"CPU profile not taken: {exc}")
            return None
        finally:
            if not keep_files:
                self.data.unlink(missing_ok=True)
                (self.run_dir / LOG_FILE).unlink(missing_ok=True)


def _last(text: str) -> str:
    """The telling line of what perf printed: the one after `Error:`, else the last.

    >>> _last("Error:\\nNo permission to enable cpu-clock event.\\n\\nYou may not have ...")
    'No permission to enable cpu-clock event.'
    >>> _last("Couldn't create thread/CPU maps: No such process\\n"), _last("")
    ("Couldn't create thread/CPU maps: No such process", 'no message')
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines[:-1]):
        if line == "Error:":
            return lines[i + 1]
    return lines[-1] if lines else "no message"
