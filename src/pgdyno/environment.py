"""Where pgdyno keeps its files and which streams and host roots it uses.

Everything a command touches outside the process is named here, so tests can run the real code
against a throwaway work directory, recorded /proc snapshots and captured streams.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

ROOT_DATA_DIR = Path("/var/lib/pgdyno")
ROOT_CACHE_DIR = Path("/var/cache/pgdyno")


def _xdg(env: Mapping[str, str], var: str, fallback: str) -> Path:
    value = env.get(var)
    if value and Path(value).is_absolute():
        return Path(value)
    return Path(env.get("HOME", str(Path.home()))) / fallback


def default_data_dir(env: Mapping[str, str], is_root: bool) -> Path:
    """The work directory: clusters, run files and the results database.

    >>> default_data_dir({"HOME": "/home/ann"}, is_root=False)
    PosixPath('/home/ann/.local/share/pgdyno')
    >>> default_data_dir({"XDG_DATA_HOME": "/x"}, is_root=False)
    PosixPath('/x/pgdyno')
    >>> default_data_dir({"HOME": "/root"}, is_root=True)
    PosixPath('/var/lib/pgdyno')
    """
    if env.get("PGDYNO_HOME"):
        return Path(env["PGDYNO_HOME"])
    if is_root:
        # root's home is private (0700): the unprivileged sandbox user could not reach it.
        return ROOT_DATA_DIR
    return _xdg(env, "XDG_DATA_HOME", ".local/share") / "pgdyno"


def default_cache_dir(env: Mapping[str, str], is_root: bool) -> Path:
    """Where unpacked PostgreSQL binaries live, shared by every work directory.

    >>> default_cache_dir({"HOME": "/home/ann"}, is_root=False)
    PosixPath('/home/ann/.cache/pgdyno')
    >>> default_cache_dir({"PGDYNO_CACHE_DIR": "/c"}, is_root=True)
    PosixPath('/c')
    """
    if env.get("PGDYNO_CACHE_DIR"):
        return Path(env["PGDYNO_CACHE_DIR"])
    if is_root:
        return ROOT_CACHE_DIR
    return _xdg(env, "XDG_CACHE_HOME", ".cache") / "pgdyno"


@dataclass(frozen=True)
class Environment:
    """The outside world as one command sees it."""

    data_dir: Path
    cache_dir: Path
    results_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    stdout: TextIO = sys.stdout
    stderr: TextIO = sys.stderr
    proc_root: Path = Path("/proc")
    sys_root: Path = Path("/sys")
    is_root: bool = False
    stdin_isatty: bool = False
    argv: tuple[str, ...] = ()  # the command line, as typed after `pgdyno`

    @classmethod
    def from_os(cls) -> Environment:
        env = dict(os.environ)
        is_root = os.geteuid() == 0
        data_dir = default_data_dir(env, is_root)
        results = Path(env["PGDYNO_RESULTS"]) if env.get("PGDYNO_RESULTS") else None
        return cls(
            data_dir=data_dir,
            cache_dir=default_cache_dir(env, is_root),
            results_path=results or data_dir / "results.sqlite",
            env=env,
            is_root=is_root,
            stdin_isatty=sys.stdin is not None and sys.stdin.isatty(),
        )

    def with_workdir(self, workdir: Path) -> Environment:
        """Move the work directory; the results database follows unless set explicitly."""
        workdir = workdir.resolve()
        results = self.results_path
        if results == self.data_dir / "results.sqlite":
            results = workdir / "results.sqlite"
        return replace(self, data_dir=workdir, results_path=results)

    def with_results(self, path: Path) -> Environment:
        return replace(self, results_path=path.resolve())

    @property
    def clusters_dir(self) -> Path:
        return self.data_dir / "clusters"

    @property
    def journal_path(self) -> Path:
        """Host settings changed by pgdyno, with their old values: what `rollback` restores."""
        return self.data_dir / "host-journal.jsonl"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"
