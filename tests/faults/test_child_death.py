"""A child pgdyno starts dies when pgdyno is SIGKILLed, without `preexec_fn`.

Children are started through `setpriv --pdeathsig TERM --` (process.py says why). These start a
real parent process that uses pgdyno's `process.Child`, as root also as the unprivileged
sandbox user (the parent-death signal must survive the user switch and the exec), kill the
parent with SIGKILL and watch the child go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from conftest import IS_ROOT, wait_for
from pgdyno import process
from pgdyno.postgres.sandbox_user import sandbox_user

pytestmark = pytest.mark.skipif(
    not process.SETPRIV.exists(), reason="util-linux setpriv is not installed"
)

PARENT = textwrap.dedent(
    """
    import subprocess, sys, threading, time
    from pgdyno import process
    run_as = process.RunAs.lookup(sys.argv[1]) if sys.argv[1] else None
    # A thread runs beside the start, as the timeline sampler does in a bench.
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    child = process.Child(["sleep", "600"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, run_as=run_as)
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


def program(pid: int) -> str:
    argv = process.pid_cmdline(pid)  # empty for a moment while it execs
    return Path(argv[0]).name if argv else ""


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def start_parent(user: str) -> tuple[subprocess.Popen[str], int]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, user], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(parent.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout=30)
    assert line and line[0].strip().isdigit(), "the parent did not start its child"
    return parent, int(line[0])


@pytest.mark.parametrize("as_sandbox_user", [False, True], ids=["same-user", "sandbox-user"])
def test_child_dies_with_its_sigkilled_parent(as_sandbox_user: bool):
    user = ""
    if as_sandbox_user:
        if not IS_ROOT:
            pytest.skip("switching users needs root")
        run_as = sandbox_user(True)
        assert run_as is not None
        user = run_as.name
    parent, child = start_parent(user)
    try:
        # setpriv execs in place: the same pid becomes sleep, in its own process group.
        assert wait_for(lambda: program(child) == "sleep", timeout=10), program(child)
        assert os.getpgid(child) == child
        if as_sandbox_user:
            assert uid_of(child) != 0
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        assert wait_for(lambda: not process.pid_alive(child), timeout=15), "child outlived parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if process.pid_alive(child):
            os.kill(child, signal.SIGKILL)


def test_missing_program_is_still_named(tmp_path: Path):
    missing = tmp_path / "no-such-program"
    with pytest.raises(process.ProcessError, match=f"because {missing} does not exist"):
        process.run([missing], what="the test")
    not_executable = tmp_path / "plain-file"
    not_executable.write_text("#!/bin/sh\n")
    with pytest.raises(process.ProcessError, match="is not executable"):
        process.run([not_executable], what="the test")
