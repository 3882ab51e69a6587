"""A throwaway sandbox for benchmark scripts: its own work directory, always cleaned up."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgdyno.environment import Environment, ResultsLocation, default_cache_dir
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import BENCH_DB


@contextmanager
def throwaway_sandbox(prefix: str) -> Iterator[tuple[Path, Binaries, Sandbox]]:
    """A started PostgreSQL 18 sandbox in a fresh /tmp work directory; stopped and removed."""
    is_root = os.geteuid() == 0
    workdir = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    workdir.chmod(0o755)  # the sandbox user must reach it
    cache = default_cache_dir(os.environ, is_root)
    results = ResultsLocation(workdir / "results.sqlite")
    env = Environment(workdir, cache, results, dict(os.environ), is_root=is_root)
    binaries = resolve(None, 18, cache)
    box = open_sandbox(env, binaries, print)
    # Owned by this script: pgdyno commands run inside find it running and leave it alone, and
    # its watchdog stops it should the script be killed outright.
    box.start({}, owner_pid=os.getpid())
    # SIGTERM (e.g. `pkill`) ends the script through the finally below, not around it.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        yield workdir, binaries, box
    finally:
        signal.signal(signal.SIGTERM, previous)
        box.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def select_only(
    binaries: Binaries, box: Sandbox, clients: int, seconds: int, *options: str
) -> list[str]:
    """Bare pgbench's select-only command line on the sandbox's bench database: `clients`
    clients on as many threads for `seconds`, simple protocol, then `options` (a log...)."""
    return [
        str(binaries.tool("pgbench")), "-n", "-b", "select-only", "-c", str(clients),
        "-j", str(clients), "-T", str(seconds), "-M", "simple", *options, box.conninfo(BENCH_DB),
    ]  # fmt: skip
