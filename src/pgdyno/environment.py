"""Where pgdyno keeps its files and which streams and host roots it uses.

Everything a command touches outside the process is named here, so tests can run the real code
against a throwaway work directory, recorded /proc snapshots and captured streams.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from pgdyno.errors import WorkdirError
from pgdyno.textsafe import scrub_secrets

ROOT_DATA_DIR = Path("/var/lib/pgdyno")
ROOT_CACHE_DIR = Path("/var/cache/pgdyno")
# The password of the server --dsn names, for that server's connections only (never libpq's
# PGPASSWORD, which every connection of the process would send, the results store's included):
# `fleet run` hands each host's password to its child this way.
DSN_PASSWORD_ENV = "PGDYNO_DSN_PASSWORD"
# off: no on-CPU profile unless asked (`--cpu-profile`, `[matrix] cpu_profile = true`): for a
# host where perf should not run unasked, and for the test suite, which would pay perf's start
# (about 0.1 s) and its stop and read (0.2 s) on every run (collect/cpu_profile.py `wanted`).
CPU_PROFILE_ENV = "PGDYNO_CPU_PROFILE"


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


# A libpq connection string: a postgresql:// URI or `keyword=value` pairs (issue 22). A file
# whose name starts like one is still reachable as ./name.
_CONNINFO = re.compile(r"(?i)^\s*(?:postgres(?:ql)?://|[a-z_]+\s*=)")


@dataclass(frozen=True)
class ResultsLocation:
    """Where results are kept: a SQLite file (the default) or a PostgreSQL database.

    The connection string may hold a password: it is kept in memory only, never in the repr, a
    message or the results themselves (`str()` masks it).

    >>> ResultsLocation.of("host=db dbname=results password=pw").conninfo is not None
    True
    >>> str(ResultsLocation.of("postgresql://ann:pw@db/results"))
    'postgresql://ann:********@db/results'
    >>> ResultsLocation.of("./host=db").path is not None
    True
    """

    path: Path | None = None
    conninfo: str | None = field(default=None, repr=False)
    # A file the user named (--results, PGDYNO_RESULTS): its directory must exist. The default
    # file's directory is the work directory, which pgdyno makes itself.
    given: bool = field(default=False, compare=False)

    @classmethod
    def of(cls, text: str) -> ResultsLocation:
        """A --results value or PGDYNO_RESULTS: a connection string is never a file name."""
        if _CONNINFO.match(text):
            return cls(conninfo=text.strip())
        return cls(path=Path(text).expanduser().resolve(), given=True)

    def __str__(self) -> str:
        return scrub_secrets(self.conninfo) if self.conninfo is not None else str(self.path)


@dataclass(frozen=True)
class Environment:
    """The outside world as one command sees it."""

    data_dir: Path
    cache_dir: Path
    results: ResultsLocation
    env: Mapping[str, str] = field(default_factory=dict)
    stdout: TextIO = sys.stdout
    stderr: TextIO = sys.stderr
    # The host to read: the live one unless a test or a recorded tree says otherwise. The only
    # place the roots have a default; everything below receives them (see RunContext.of).
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
        given = env.get("PGDYNO_RESULTS")
        return cls(
            data_dir=data_dir,
            cache_dir=default_cache_dir(env, is_root),
            results=ResultsLocation.of(given)
            if given
            else ResultsLocation(data_dir / "results.sqlite"),
            env=env,
            is_root=is_root,
            stdin_isatty=sys.stdin is not None and sys.stdin.isatty(),
        )

    def with_workdir(self, workdir: Path) -> Environment:
        """Move the work directory; the results database follows unless set explicitly."""
        workdir = workdir.resolve()
        results = self.results
        if results.path == self.data_dir / "results.sqlite":
            results = ResultsLocation(workdir / "results.sqlite")
        return replace(self, data_dir=workdir, results=results)

    def with_results(self, text: str) -> Environment:
        return replace(self, results=ResultsLocation.of(text))

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


def _within(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


def workdir_problem(data_dir: Path, exc: OSError) -> WorkdirError | None:
    """The work directory's fault behind `exc`, as one sentence; None when `exc` is elsewhere.

    >>> ro = OSError(errno.EROFS, "Read-only file system", "/w/pgdyno.lock")
    >>> print(workdir_problem(Path("/w"), ro))
    the work directory /w cannot be used (Read-only file system: /w/pgdyno.lock): make it \
writable or choose another --workdir.
    >>> workdir_problem(Path("/w"), OSError(errno.EROFS, "Read-only file system", "/x")) is None
    True
    """
    names = [n for n in (exc.filename, exc.filename2) if isinstance(n, str)]
    paths = [Path(n).absolute() for n in names]
    # A file under the work directory, or a parent the work directory could not be made in.
    if not any(_within(p, data_dir) or _within(data_dir, p) for p in paths):
        return None
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = "make it writable or choose another --workdir"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "free some space on its disk or choose another --workdir"
    elif exc.errno in (errno.ENOTDIR, errno.EEXIST):
        hint = "a file is in the way of a directory there: choose another --workdir"
    else:
        hint = "choose another --workdir"
    reason = exc.strerror or type(exc).__name__
    return WorkdirError(
        f"the work directory {data_dir} cannot be used ({reason}: {names[0]}): {hint}."
    )


@contextmanager
def workdir_errors(data_dir: Path) -> Iterator[None]:
    """Turn an OSError on the work directory or anything under it into one sentence."""
    try:
        yield
    except OSError as exc:
        problem = workdir_problem(data_dir, exc)
        if problem is None:
            raise
        raise problem from exc


def ensure_writable(data_dir: Path, directory: Path) -> None:
    """Make `directory` (under the work directory) and prove files can be written in it, so an
    unusable work directory is one sentence before any run, not a failure of every run."""
    with workdir_errors(data_dir):
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".pgdyno-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
