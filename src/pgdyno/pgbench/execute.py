"""Run pgbench as a child process and gather what it leaves behind (stdout, logs)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pgdyno import process
from pgdyno.errors import ParseError, PgbenchFailed
from pgdyno.pgbench.output import Summary, parse_summary
from pgdyno.postgres.binaries import parse_version_output

# pgbench needs time beyond -T to connect and to finish in-flight transactions.
GRACE_S = 120
# How often pgdyno wakes up while pgbench runs (progress bar, time-out): rarely, to stay
# out of the way of the load generator and the server.
POLL_S = 0.5


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
    """Run pgbench to completion; `on_tick(elapsed_s)` is called a few times a second.

    Raises PgbenchFailed (with pgbench's stderr) when pgbench fails or its output is unusable.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = run_dir / "pgbench.stdout", run_dir / "pgbench.stderr"
    started = time.monotonic()
    started_at = time.time()
    with (
        out_path.open("w") as out,
        err_path.open("w") as err,
        process.Child(argv, stdout=out, stderr=err, env=env, cwd=run_dir) as child,
    ):
        if on_spawn:
            on_spawn(child.pid)
        while child.poll() is None:
            elapsed = time.monotonic() - started
            if elapsed > duration_s + GRACE_S:
                child.stop()
                raise PgbenchFailed(
                    f"pgbench did not finish within {duration_s + GRACE_S:.0f} s and was stopped.",
                    err_path.read_text(errors="replace"),
                )
            if on_tick:
                on_tick(elapsed)
            time.sleep(POLL_S)
        code = child.wait()
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    if code != 0:
        raise PgbenchFailed(
            f"pgbench failed (exit code {code}): {process.last_line(stderr or stdout)}", stderr
        )
    try:
        summary = parse_summary(stdout)
    except ParseError as exc:
        raise PgbenchFailed(f"pgbench's output could not be read: {exc}", stderr) from exc
    return PgbenchResult(summary, stdout, stderr, started_at)


def version(pgbench: Path) -> str:
    out = process.run([pgbench, "--version"], what="pgbench --version", timeout=30)
    return parse_version_output(out.stdout)
