"""A remote host's /proc, /sys and /etc files, copied into a local tree (data/remote_files.toml).

Every reader of host facts takes a /proc and a /sys root (host/machine.py, host/disks.py)
and, under a root other than the live one, reads nothing of this machine. So
the remote host is known by running those same readers on its copy: one implementation of
every fact, whether the host is this one, a recorded one or one over SSH.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path, PurePosixPath

from pgdyno.errors import RemoteFailed
from pgdyno.remote.agent_client import Agent


def tree_globs() -> list[str]:
    text = (files("pgdyno") / "data" / "remote_files.toml").read_text()
    return list(tomllib.loads(text)["globs"])


def _local(root: Path, remote: str) -> Path:
    path = PurePosixPath(remote)
    if not path.is_absolute() or ".." in path.parts:
        raise RemoteFailed(f"the remote agent named an unexpected path ({remote!r}).")
    return root / path.relative_to("/")


def write_tree(root: Path, entries: list[list[str]]) -> int:
    """Recreate the agent's entries ([path, "f", text] or [path, "l", target]) under `root`;
    the number of files written."""
    written = 0
    for path, kind, value in entries:
        local = _local(root, path)
        local.parent.mkdir(parents=True, exist_ok=True)
        if kind == "l":
            if not local.is_symlink():
                # Absolute targets point into the copy; relative ones resolve there already.
                target = _local(root, value) if value.startswith("/") else Path(value)
                local.symlink_to(target)
        elif kind == "f" and not local.is_symlink():
            local.write_text(value)
            written += 1
    return written


def copy_host(agent: Agent, root: Path) -> tuple[Path, Path]:
    """Copy the remote host's files under `root`; its (/proc, /sys) roots there."""
    answer = agent.request("tree", globs=tree_globs())
    written = write_tree(root, answer["entries"])
    if written == 0:
        raise RemoteFailed(f"nothing could be read of {agent.session.destination}'s /proc and "
                           "/sys: pgdyno needs a Linux host.")  # fmt: skip
    return root / "proc", root / "sys"
