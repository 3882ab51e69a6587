"""pgdyno processes for sweeps that start dozens of them (tests/faults/test_crash_points.py).

Each is a real process running the console script's entry point (`pgdyno.cli.run`) with its
own arguments, environment, exit status and death by signal, as `subprocess.run([pgdyno, ...])`
gives; but it is forked from multiprocessing's fork server, which imported pgdyno's commands
once, so that each point of a sweep does not pay the interpreter's start and pgdyno's imports
again (about 0.7 s of CPU a process, twice a point; on a loaded host the sweeps' largest cost).
The fork server is a single-threaded process of its own: forking it is safe where forking the
pytest worker (threads of its own) is not.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

# The commands the sweeps run, imported by the fork server before it forks anything.
PRELOAD = ["pgdyno.cli", "pgdyno.cli.compare_cmd", "pgdyno.cli.tune_cmd", "pgdyno.cli.rollback_cmd"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def _main(argv: Sequence[str], environ: Mapping[str, str], out: str, err: str) -> None:
    """In the forked process: the environment, stdin from /dev/null, stdout and stderr to
    files, then pgdyno's entry point, whose sys.exit is the process's exit status."""
    os.environ.clear()
    os.environ.update(environ)
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY),
                            (2, err, os.O_WRONLY)):  # fmt: skip
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.argv = ["pgdyno", *argv]
    from pgdyno.cli import run

    run()


def pgdyno(
    argv: Sequence[str], environ: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """`pgdyno ARGV` run to its end (or its death by a signal: a negative return code) in a
    forked process; what it printed, as `subprocess.run(..., capture_output=True, text=True)`
    returns it. A process still running after `timeout` seconds is killed and fails the test."""
    with tempfile.TemporaryDirectory(prefix="pgdyno-forked-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        out.touch()
        err.touch()
        child = _context.Process(target=_main, args=(list(argv), dict(environ), str(out), str(err)))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise AssertionError(f"pgdyno {' '.join(argv)} still ran after {timeout} s")
        return subprocess.CompletedProcess(
            ["pgdyno", *argv], child.exitcode, out.read_text(), err.read_text()
        )
