"""The sandbox as the target of a comparison's sets: one server kept running with the current
set's PostgreSQL settings (a reload when that is enough, a restart when a changed setting needs
one, the server of another version stopped first), and the filesystem a storage set asks for.
The existing server's counterpart is pgdyno.experiment.server_sets.ServerSwitcher.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pgdyno.changes.alter import refuse_changed_sandbox
from pgdyno.environment import Environment
from pgdyno.errors import ClusterError
from pgdyno.experiment.storage_sets import SetStorage
from pgdyno.experiment.target import Target, open_sandbox, sandbox_as_target
from pgdyno.plan.check import CheckedSet, MetaLoader
from pgdyno.postgres.cluster import Sandbox, taken_ports
from pgdyno.postgres.server import reloaded


@dataclass
class _Running:
    box: Sandbox
    settings: dict[str, str]


class SetSwitcher(Protocol):
    """Makes a set's PostgreSQL settings current and says where its runs go; `close` undoes
    what it changed (called on every way out, and before huge pages go back)."""

    def use(self, checked: CheckedSet) -> Target: ...

    def close(self) -> None: ...


class SandboxSwitcher:
    """Keeps one sandbox running with the current set's settings; stops what it started."""

    def __init__(
        self, env: Environment, meta_for: MetaLoader, log: Callable[[str], None],
        dataset_bytes: int = 0,
    ) -> None:  # fmt: skip
        self.env = env
        self.meta_for = meta_for
        self.log = log
        self.running: dict[int, _Running] = {}
        # [set.storage]: built on first use, sized for the largest dataset expected
        self.storage = SetStorage(env.data_dir, log, dataset_bytes)

    def use(self, checked: CheckedSet) -> Target:
        return sandbox_as_target(self.box_for(checked))

    def box_for(self, checked: CheckedSet) -> Sandbox:
        binaries = checked.binaries
        box = open_sandbox(self.env, binaries, self.log)
        for major in [m for m in self.running if m != binaries.major]:
            self.running.pop(major).box.stop()  # one server at a time: no competing for RAM
        current = self.running.get(binaries.major)
        storage = checked.spec.storage
        if self.storage.wanted(checked.name, storage):  # another filesystem under the data
            if current is not None:
                self.running.pop(binaries.major).box.stop()
                current = None
            self.storage.arrange(box, checked.name, storage)
        if current is None:
            if box.postmaster_pid() is not None:
                raise ClusterError(
                    f"sandbox {box.root.name} is already running, and compare must restart it "
                    "with each set's settings: stop it with `pgdyno sandbox stop` first."
                )
            self._start(box, checked)
            return box
        changed = {
            name
            for name in current.settings.keys() | checked.pg.keys()
            if current.settings.get(name) != checked.pg.get(name)
        }
        meta = self.meta_for(binaries)
        if any(meta[name].needs_restart for name in changed if name in meta):
            box.stop()
            self._start(box, checked)
        elif changed:
            reloaded(box.conninfo(), None, f"sandbox {box.root.name}",
                     lambda _client: box.reload(checked.pg))  # fmt: skip
            current.settings = dict(checked.pg)
        return box

    def _start(self, box: Sandbox, checked: CheckedSet) -> None:
        refuse_changed_sandbox(box)
        box.start(
            checked.pg, owner_pid=os.getpid(), binaries=checked.binaries,
            taken_ports=taken_ports(self.env.clusters_dir),
        )  # fmt: skip
        self.running[checked.binaries.major] = _Running(box, dict(checked.pg))

    def close(self) -> None:
        try:
            for started in self.running.values():
                started.box.stop()
            self.running.clear()
        finally:
            self.storage.close()  # after the server stopped: nothing holds the filesystems
