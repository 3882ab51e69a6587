"""The OS timeline of a remote host: the agent reads the sampler's /proc files once a second
and streams their text; they are parsed here by the very functions the local sampler uses
(collect/procfs.py), so a remote series means exactly what a local one does.

The agent ticks on whole seconds of this machine's clock (it is told the clock offset), as the
local sampler does, and stamps each tick with its own monotonic clock: rates are computed over
the remote host's own intervals, whatever the network delays.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pgdyno.collect.procfs import SNAPSHOT_FILES, ProcSnapshot, snapshot_of, wanted_device
from pgdyno.errors import RemoteUnavailable
from pgdyno.remote.agent_client import Agent, ClockOffset

LATE_S = 0.9  # how long a tick may be waited for before its second is left without OS figures


class RemoteProc:
    """An OsSource (collect/sampler.py) fed by the agent's ticks."""

    def __init__(self, agent: Agent, offset: ClockOffset, devices: Sequence[str] | None) -> None:
        self.agent = agent
        self.offset = offset
        self.devices = None if devices is None else frozenset(devices)
        self.shown = Path(f"{agent.session.destination}:/proc")
        self._latest: dict[str, Any] | None = None
        self._used_mono: float | None = None
        self._watched: set[str] = set()

    def start(self) -> None:
        self.agent.request(
            "sample", paths=[f"/proc/{name}" for name in SNAPSHOT_FILES], interval=1.0,
            offset=self.offset.offset_s,
        )  # fmt: skip

    def stop(self) -> None:
        self.agent.request("stop_sampling")
        while not self.agent.ticks.empty():
            self.agent.ticks.get_nowait()

    def _take(self, timeout_s: float) -> bool:
        try:
            tick = self.agent.ticks.get(timeout=timeout_s)
        except queue.Empty:
            return False
        if tick.get("gone"):
            self.agent.ticks.put(tick)
            raise RemoteUnavailable(f"the connection to {self.agent.session.destination} ended")
        self._latest = tick["tick"]
        return True

    def snapshot(self) -> ProcSnapshot | None:
        """The newest tick not used yet; None when none came in time."""
        while self._take(0):
            pass
        now_remote = time.time() + self.offset.offset_s
        if self._latest is None or self._latest["wall"] < now_remote - 0.5:
            self._take(LATE_S)
        tick = self._latest
        if tick is None or tick["mono"] == self._used_mono:
            return None
        self._used_mono = tick["mono"]
        files: dict[str, str | None] = tick["files"]
        return snapshot_of(
            lambda name: files.get(f"/proc/{name}"), float(tick["mono"]),
            partial(wanted_device, devices=self.devices), self.shown,
        )  # fmt: skip

    def read(self, name: str) -> str | None:
        """A watched process's /proc/<pid>/stat from the newest tick (the first ask watches)."""
        path = f"/proc/{name}"
        if path not in self._watched:
            self._watched.add(path)
            pid, _, rest = name.partition("/")
            if rest == "stat" and pid.isdigit():
                self.agent.request("watch", pid=int(pid))
            return None
        return None if self._latest is None else self._latest["files"].get(path)
