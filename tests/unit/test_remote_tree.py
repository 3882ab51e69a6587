"""A remote host's files copied into a local tree: every host reader works on the copy.

The entries are what the agent sends (remote/agent.py `tree`), made here by the agent's own
function on this machine's files, then read back through the readers of recorded hosts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pgdyno.errors import RemoteFailed
from pgdyno.host.disks import device_for_path
from pgdyno.host.machine import read_host
from pgdyno.remote import agent
from pgdyno.remote.host_tree import tree_globs, write_tree


def test_the_copy_of_this_host_gives_the_facts_of_this_host(tmp_path: Path) -> None:
    write_tree(tmp_path, agent.tree(tree_globs()))
    copied = read_host(tmp_path / "proc", tmp_path / "sys")
    here = read_host(Path("/proc"), Path("/sys"))
    assert copied.hostname == here.hostname and copied.hostname
    assert copied.kernel == here.kernel and copied.machine_id == here.machine_id
    assert copied.memory_total_bytes == here.memory_total_bytes
    assert copied.os_release == here.os_release and copied.cpu_model == here.cpu_model
    # the copy's CPUs are those online in it (affinity is this process's, not the host's)
    assert copied.cpu_count == os.cpu_count()


def test_symlinks_on_the_way_are_kept_so_device_lookups_resolve(tmp_path: Path) -> None:
    entries = agent.tree(tree_globs())
    links = {path for path, kind, _ in entries if kind == "l"}
    assert "/proc/self" in links  # /proc/self/mountinfo is reached through the agent's pid
    write_tree(tmp_path, entries)
    here = device_for_path(Path("/"), Path("/proc"), Path("/sys"))
    copied = device_for_path(Path("/"), tmp_path / "proc", tmp_path / "sys")
    assert here is not None and copied is not None
    assert (copied.name, copied.disk, copied.fstype) == (here.name, here.disk, here.fstype)
    assert copied.scheduler == here.scheduler and copied.read_ahead_kb == here.read_ahead_kb


@pytest.mark.parametrize("path", ["etc/passwd", "/../etc/passwd", "/proc/../../x"])
def test_a_path_leaving_the_copy_is_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(RemoteFailed, match="unexpected path"):
        write_tree(tmp_path / "copy", [[path, "f", "x"]])
    assert not (tmp_path / "etc").exists()
