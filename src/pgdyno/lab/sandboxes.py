"""`pgdyno sandbox start|stop|status|destroy`: the sandbox clusters of a work directory (one
per major version), each step under the work directory's lock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import (
    check_settings_for,
    open_sandbox,
    sandbox_binaries,
    workdir_lock,
)
from pgdyno.postgres.cluster import (
    Sandbox,
    all_sandboxes,
    cluster_name,
    recover,
    taken_ports,
)
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.records import Status
from pgdyno.undo import server as pg_journal
from pgdyno.undo.host import pending


@dataclass(frozen=True)
class Started:
    status: Status
    conninfo: str


def start(
    env: Environment,
    settings: Mapping[str, str],
    pg_bin: Path | None,
    pg_version: int | None,
    log: Callable[[str], None],
) -> Started:
    """Create the sandbox if needed and start it with `settings` (restarted if it runs)."""
    binaries = sandbox_binaries(env, pg_bin, pg_version, log)
    check_settings_for(binaries, settings)  # before a running sandbox is stopped
    with workdir_lock(env):
        box = open_sandbox(env, binaries, log)
        if box.postmaster_pid() is not None:
            log(f"sandbox {box.root.name} is already running; restarting it")
            box.stop()
        box.start(
            settings, owner_pid=None, binaries=binaries, taken_ports=taken_ports(env.clusters_dir)
        )
        return Started(box.status(), box.conninfo())


def selected(env: Environment, pg_version: int | None) -> list[Sandbox]:
    """The sandboxes of the work directory, or those of `pg_version` (which must exist): its
    sandbox and the twin servers of its comparisons (`pg18-<set>`, experiment/twin_sets.py)."""
    run_as = sandbox_user(env.is_root, create=False)
    boxes = all_sandboxes(env.clusters_dir, run_as)
    if pg_version is not None:
        name = cluster_name(pg_version)
        boxes = [b for b in boxes if b.root.name == name or b.root.name.startswith(f"{name}-")]
        if not boxes:
            raise UsageError(f"there is no sandbox for PostgreSQL {pg_version} in {env.data_dir}.")
    return boxes


def stop(env: Environment, pg_version: int | None) -> list[str]:
    """Stop the running sandboxes (all, or one version); the names of those stopped."""
    with workdir_lock(env):
        return [box.root.name for box in selected(env, pg_version) if box.stop()]


def statuses(env: Environment, log: Callable[[str], None]) -> list[Status]:
    """Each sandbox's status, after recovering what a killed pgdyno left (said in `log`)."""
    run_as = sandbox_user(env.is_root, create=False)
    for note in recover(env.clusters_dir, run_as):
        log(note)
    return [box.status() for box in all_sandboxes(env.clusters_dir, run_as)]


def destroyable(env: Environment, pg_version: int | None) -> list[Sandbox]:
    """The sandboxes `destroy` would delete (all, or one version); refused while changes made
    with them are pending."""
    boxes = selected(env, pg_version)
    _refuse_pending(env, [b.root.name for b in boxes])
    return boxes


def destroy(env: Environment, boxes: list[Sandbox]) -> None:
    """Stop and delete `boxes` (from `destroyable`) with their data; results are kept."""
    with workdir_lock(env):
        for box in boxes:
            box.destroy()


def _refuse_pending(env: Environment, names: list[str]) -> None:
    """A sandbox with changes pending in the journals is not destroyed: the host settings
    changed with it (huge pages sized for it, say) would stay changed, with nothing left to
    tell the rollback how to put them back in order."""
    contents = pg_journal.contents(env.data_dir)
    held = sorted(
        {c.server.get("cluster", "") for c in contents.pending if c.server.get("kind") == "sandbox"}
        & set(names)
    )
    host = pending(env.journal_path, proc_root=env.proc_root, sys_root=env.sys_root)
    if held or (host and names):
        what = f"sandbox {', '.join(held)} has" if held else "this work directory has host"
        raise UsageError(
            f"{what} settings pgdyno changed that are not rolled back: run `pgdyno rollback` "
            "first, then destroy."
        )
