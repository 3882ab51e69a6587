"""How many huge pages a configuration's shared memory needs, as PostgreSQL itself computes it.

`postgres -C shared_memory_size_in_huge_pages` (PostgreSQL 15+) runs the postmaster's start-up
up to the sizing of shared memory (every setting, preloaded library and, in 18, asynchronous
I/O counted) and prints the figure without starting a server or allocating the memory. It
needs a stopped data directory of its version, though: a PG_VERSION file and a pg_control it
reads before sizing. pgdyno keeps those two files of one initdb per version in its cache
(`shmem-probe/<version>/`) and copies them into a throwaway directory for each question, so no
two questions share a lock file and nothing of a real cluster is touched. Like every other
PostgreSQL program it runs as the sandbox user when pgdyno is root (postgres refuses root).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pgdyno import process
from pgdyno.errors import PgdynoError, ProcessError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.sandbox_user import hand_over, require_reachable, sandbox_user

FIGURE = "shared_memory_size_in_huge_pages"
FIRST_MAJOR = 15  # the first version that reports it
_TEMPLATE_FILES = ("PG_VERSION", "global/pg_control")


class ProbeError(PgdynoError):
    """postgres -C could not give the figure (the reason is the message)."""


def probe_argv(
    postgres: str | Path, data_dir: str | Path, settings: Mapping[str, str]
) -> list[str]:
    """The command that prints the figure for `settings`, as a user can run it too.

    >>> probe_argv("postgres", "DATADIR", {"shared_buffers": "2GB", "max_connections": "500"})
    ['postgres', '-D', 'DATADIR', '-C', 'shared_memory_size_in_huge_pages', '-c', \
'shared_buffers=2GB', '-c', 'max_connections=500']
    """
    argv = [str(postgres), "-D", str(data_dir), "-C", FIGURE]
    for name, value in settings.items():
        argv += ["-c", f"{name}={value}"]
    return argv


def parse_figure(stdout: str) -> int | None:
    """The last line postgres -C printed: a page count, or None for -1 (no huge pages here).

    >>> parse_figure("1252\\n"), parse_figure("-1\\n")
    (1252, None)
    """
    lines = stdout.strip().splitlines()
    if not lines or not lines[-1].strip().lstrip("-").isdigit():
        raise ProbeError(f"postgres -C printed {stdout.strip()!r}, not a number of pages.")
    pages = int(lines[-1])
    return None if pages < 0 else pages


def huge_pages_needed(
    binaries: Binaries, settings: Mapping[str, str], cache_dir: Path
) -> int | None:
    """shared_memory_size_in_huge_pages of `binaries` for `settings` (postgresql.conf text);
    None where the build reports no huge pages (-1). ProbeError when it cannot be had."""
    if binaries.major < FIRST_MAJOR:
        raise ProbeError(f"PostgreSQL {binaries.major} does not report {FIGURE} (15 and later do).")
    run_as = sandbox_user(os.geteuid() == 0)
    template = _template(binaries, cache_dir, run_as)
    with tempfile.TemporaryDirectory(prefix="pgdyno-shmem-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir(mode=0o700)
        (data_dir / "global").mkdir(mode=0o700)
        for name in _TEMPLATE_FILES:
            shutil.copyfile(template / name, data_dir / name)
        (data_dir / "postgresql.conf").write_text("")
        Path(tmp).chmod(0o755)
        hand_over(data_dir, run_as)
        argv = probe_argv(binaries.tool("postgres"), data_dir, settings)
        try:
            done = process.run(argv, what="postgres -C", run_as=run_as, timeout=120)
        except ProcessError as exc:
            raise ProbeError(
                f"postgres -C refused the configuration: {process.last_line(exc.stderr)}"
            ) from exc
    return parse_figure(done.stdout)


def _template(binaries: Binaries, cache_dir: Path, run_as: process.RunAs | None) -> Path:
    """PG_VERSION and pg_control of one initdb of this version, made once in the cache."""
    root = cache_dir / "shmem-probe"
    template = root / binaries.version
    if all((template / name).is_file() for name in _TEMPLATE_FILES):
        return template
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    require_reachable(binaries.bin_dir, run_as, "PostgreSQL binaries")
    with tempfile.TemporaryDirectory(prefix=".init-", dir=root) as tmp:
        Path(tmp).chmod(0o755)
        hand_over(Path(tmp), run_as)
        data_dir = Path(tmp) / "data"
        try:
            process.run(
                [binaries.tool("initdb"), "-D", data_dir, "--no-sync", "--no-instructions",
                 "-A", "trust", "-E", "UTF8", "--locale=C"],
                what="initdb", run_as=run_as, cwd=Path(tmp), timeout=300,
            )  # fmt: skip
        except ProcessError as exc:
            raise ProbeError(f"initdb failed: {process.last_line(exc.stderr)}") from exc
        kept = Path(tmp) / "kept"
        (kept / "global").mkdir(parents=True)
        for name in _TEMPLATE_FILES:
            shutil.copyfile(data_dir / name, kept / name)
        try:
            kept.rename(template)
        except OSError:  # another pgdyno made it meanwhile
            if not (template / "global" / "pg_control").is_file():
                raise
    return template
