"""Run pgbench as a child process and gather what it leaves behind (stdout, logs)."""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgdyno import process
from pgdyno.errors import ParseError, PgbenchFailed
from pgdyno.pgbench.output import Summary, parse_summary
from pgdyno.postgres.binaries import parse_version_output

# pgbench needs time beyond -T to connect and to finish in-flight transactions; a client of
# the TPC-C-like workload with keying and think times may also first wait out its keying time
# and then its think time, up to 18 + 120 s (pgdyno.tpcc.scripts).
GRACE_S = 150
# How often pgdyno wakes up while pgbench runs (progress bar, time-out): once a second, to stay
# out of the way of the load generator and the server. pgbench's exit wakes it at once.
TICK_S = 1.0


@dataclass(frozen=True)
class PgbenchResult:
    summary: Summary
    stdout: str
    stderr: str  # holds the -P progress lines
    started_at: float  # epoch seconds when pgbench was started


def execute(
    argv: list[str],
    *,
    run_dir: Path,
    duration_s: float,
    env: Mapping[str, str] | None = None,
    on_tick: Callable[[float], None] | None = None,
    on_spawn: Callable[[int], None] | None = None,
) -> PgbenchResult:
    """Run pgbench to completion; `on_tick(elapsed_s)` is called once a second.

    Raises PgbenchFailed (with pgbench's stderr) when pgbench fails or its output is unusable.
    """
    out_path, err_path = run_dir / "pgbench.stdout", run_dir / "pgbench.stderr"
    started = time.monotonic()
    started_at = time.time()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with (
            out_path.open("w") as out,
            err_path.open("w") as err,
            process.Child(argv, stdout=out, stderr=err, env=env, cwd=run_dir) as child,
        ):
            if on_spawn:
                on_spawn(child.pid)
            code = _wait(child, started, duration_s, on_tick, err_path)
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
    except OSError as exc:  # a full or read-only disk under the run's directory
        raise PgbenchFailed(
            f"pgbench's output files under {run_dir} could not be written or read: "
            f"{exc.strerror or exc}"
        ) from exc
    return pgbench_result(code, stdout, stderr, started_at)


def pgbench_result(
    code: int, stdout: str, stderr: str, started_at: float, where: str = ""
) -> PgbenchResult:
    """A finished pgbench's result: its summary read from `stdout`, or PgbenchFailed saying
    why (from `stderr`; `where` names another host, e.g. " (on db1)")."""
    if code != 0:
        raise PgbenchFailed(failure_reason(code, stderr) + where, stderr)
    try:
        summary = parse_summary(stdout)
    except ParseError as exc:
        raise PgbenchFailed(f"pgbench's output could not be read: {exc}", stderr) from exc
    return PgbenchResult(summary, stdout, stderr, started_at)


def _wait(
    child: process.Child,
    started: float,
    duration_s: float,
    on_tick: Callable[[float], None] | None,
    err_path: Path,
) -> int:
    """pgbench's exit code; stopped (and PgbenchFailed) when it overstays -T by GRACE_S."""
    with _exit_waiter(child.pid) as wait_exit:
        code = wait_for_exit(
            child.poll, started, duration_s, on_tick, sleep=lambda: wait_exit(TICK_S)
        )
    if code is None:
        child.stop()
        raise PgbenchFailed(
            f"pgbench did not finish within {duration_s + GRACE_S:.0f} s and was stopped.",
            err_path.read_text(errors="replace"),
        )
    return child.wait()


def wait_for_exit(
    poll: Callable[[], int | None],
    started: float,
    duration_s: float,
    on_tick: Callable[[float], None] | None,
    *,
    sleep: Callable[[], object],
    tick_s: float = 0.0,
) -> int | None:
    """The exit code `poll` gives once pgbench ends, or None when it overstays -T by GRACE_S
    (the caller stops it). Between polls it `sleep`s; `on_tick(elapsed_s)` is called at most
    once every `tick_s` seconds. Both drivers wait with it: the local one (a pidfd wakes the
    sleep at the exit) and the one over SSH (polling the remote agent without blocking it).
    """
    ticked = started
    while (code := poll()) is None:
        now = time.monotonic()
        if now - started > duration_s + GRACE_S:
            return None
        if on_tick is not None and now - ticked >= tick_s:
            ticked = now
            on_tick(now - started)
        sleep()
    return code


@contextmanager
def _exit_waiter(pid: int) -> Iterator[Callable[[float], object]]:
    """A function that sleeps up to its argument in seconds, or until process `pid` exits.

    A pidfd (Linux 5.3+) becomes readable when the process exits, so the wait is one sleep
    that ends at the exit; without one, a plain sleep (the exit is noticed at the next tick).
    """
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, or an old kernel
        fd = None
    if fd is None:
        yield time.sleep
        return
    exited = select.poll()
    exited.register(fd, select.POLLIN)
    try:
        yield lambda seconds: exited.poll(seconds * 1000)
    finally:
        os.close(fd)


# pgbench's closing line after a client aborted: true, but it hides the line saying why.
_GENERIC = ("Run was aborted", "the above results are incomplete")


def failure_reason(code: int, stderr: str) -> str:
    r"""Why pgbench failed, from its stderr only: stdout holds the summary (`tps = ...`), which
    is never a reason. The first telling line wins; "Run was aborted" only closes the report.

    >>> failure_reason(2, "FATAL:  terminating connection due to unexpected postmaster exit\n"
    ...                "pgbench: error: client 0 aborted in command 4 (SQL) of script 0\n"
    ...                "pgbench: error: Run was aborted; the above results are incomplete.\n")
    'pgbench failed (exit code 2): FATAL:  terminating connection due to unexpected postmaster exit'
    >>> failure_reason(2, ""), failure_reason(-9, "")
    ('pgbench failed (exit code 2) without an error message', 'pgbench was killed by signal SIGKILL')
    """  # noqa: E501
    if code < 0:
        return f"pgbench was killed by signal {_signal_name(-code)}"
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    telling = [line for line in lines if not any(g in line for g in _GENERIC)]
    if not lines:
        return f"pgbench failed (exit code {code}) without an error message"
    return f"pgbench failed (exit code {code}): {telling[0] if telling else lines[-1]}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def version(pgbench: Path) -> str:
    out = process.run([pgbench, "--version"], what="pgbench --version", timeout=30)
    return parse_version_output(out.stdout)
