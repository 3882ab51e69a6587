"""The unprivileged OS user a sandbox cluster runs as when pgdyno is started by root.

PostgreSQL refuses to run as root. pgdyno then creates (once) a system user `pgdyno` with no
login shell and no home, and runs initdb, pg_ctl and the postmaster as that user.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from pgdyno import process
from pgdyno.errors import ClusterError
from pgdyno.process import RunAs

SANDBOX_USER = "pgdyno"


def sandbox_user(is_root: bool, create: bool = True) -> RunAs | None:
    """None when pgdyno itself is unprivileged (the cluster runs as the invoking user)."""
    if not is_root:
        return None
    existing = RunAs.lookup(SANDBOX_USER)
    if existing is not None or not create:
        return existing
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    process.run(
        [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", "/usr/sbin/nologin", "--comment", "pgdyno sandbox PostgreSQL", SANDBOX_USER],
        what=f"creating the sandbox user {SANDBOX_USER}",
    )  # fmt: skip
    created = RunAs.lookup(SANDBOX_USER)
    if created is None:
        raise ClusterError(f"useradd reported success but user {SANDBOX_USER} does not exist.")
    return created


def unreachable_ancestor(path: Path, user: RunAs) -> Path | None:
    """The first directory on the way to `path` that `user` may not traverse, if any."""
    groups = {user.gid}
    for ancestor in [*reversed(path.parents), path]:
        if not ancestor.exists():
            break
        st = ancestor.stat()
        if st.st_uid == user.uid:
            ok = bool(st.st_mode & stat.S_IXUSR)
        elif st.st_gid in groups:
            ok = bool(st.st_mode & stat.S_IXGRP)
        else:
            ok = bool(st.st_mode & stat.S_IXOTH)
        if not ok:
            return ancestor
    return None


def require_reachable(path: Path, user: RunAs | None, what: str) -> None:
    if user is None:
        return
    blocked = unreachable_ancestor(path, user)
    if blocked is not None:
        raise ClusterError(
            f"the sandbox user {user.name} cannot reach the {what} {path} because {blocked} is "
            "closed to other users; choose a --workdir outside it (root's default is "
            "/var/lib/pgdyno)."
        )


def hand_over(path: Path, user: RunAs | None) -> None:
    """Make `path` (recursively) owned by the sandbox user."""
    if user is None:
        return
    for entry in [path, *path.rglob("*")]:
        os.chown(entry, user.uid, user.gid, follow_symlinks=False)
