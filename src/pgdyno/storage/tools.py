"""The storage layer's programs (losetup, mkfs.*, mount, umount, blkid): found, then run
through pgdyno.process, with a missing one named together with the package to install.

The search covers the PATH and then /usr/sbin and /sbin, where Debian keeps these programs
(a non-root PATH may lack them, and `plan check` runs as any user).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pgdyno.errors import ProcessError
from pgdyno.process import last_line, run
from pgdyno.storage.filesystems import TOOLS
from pgdyno.undo.filesystems import StorageError

_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def search_path(env_path: str | None = None) -> str:
    """
    >>> search_path("/usr/bin:/usr/sbin")
    '/usr/bin:/usr/sbin:/usr/local/sbin:/sbin'
    """
    parts = [p for p in (env_path if env_path is not None else os.defpath).split(":") if p]
    return ":".join(dict.fromkeys([*parts, *_SBIN]))


def find(program: str) -> str | None:
    return shutil.which(program, path=search_path(os.environ.get("PATH")))


def missing(program: str, package: str | None = None) -> str:
    """
    >>> missing("mkfs.xfs", "xfsprogs")
    'mkfs.xfs is missing: install it with `apt-get install xfsprogs`.'
    """
    package = package or TOOLS.get(program)
    if package is None:
        return f"{program} is missing: install it and run again."
    return f"{program} is missing: install it with `apt-get install {package}`."


def run_tool(
    argv: Sequence[str | Path], *, what: str, hint: str, package: str | None = None,
    timeout: float = 120, check: bool = True,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run a storage program; StorageError (its last line of complaint, then `hint`: what to
    do) when it fails or is missing, unless `check` is False (then only when it is missing or
    could not run)."""
    program = str(argv[0])
    found = find(program)
    if found is None:
        raise StorageError(missing(program, package))
    try:
        done = run([found, *argv[1:]], what=what, timeout=timeout, check=False)
    except ProcessError as error:
        raise StorageError(f"{str(error).rstrip('.')}: {hint}.") from None
    if check and done.returncode != 0:
        raise StorageError(
            f"{what} failed (exit code {done.returncode}: "
            f"{last_line(done.stderr or done.stdout).rstrip('.')}): {hint}."
        )
    return done
