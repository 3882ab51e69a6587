"""The state of a fleet run, kept in its directory for `pgdyno fleet status` (and for anyone
watching from another terminal): one JSON file, rewritten whole (atomically) on every change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.process import pid_alive
from pgdyno.textsafe import strict_json, strict_loads

STATUS_FILE = "status.json"
# The files of a fleet's directory beside its hosts' directories: no host may be named so.
RESERVED = (STATUS_FILE, Path(STATUS_FILE).with_suffix(".partial").name)
FLEETS_DIR = "fleet"  # under the work directory: one directory per fleet run
STATES = ("waiting", "running", "done", "failed", "interrupted")


@dataclass
class HostState:
    name: str
    ssh: str
    state: str = "waiting"
    runs_done: int = 0
    runs_planned: int | None = None
    message: str = ""  # the last thing it said: a progress line, or its error
    exit_code: int | None = None


@dataclass
class FleetState:
    plan: str
    controller_pid: int
    started_at: str
    results: str  # where the runs end up (never a password)
    hosts: list[HostState] = field(default_factory=list)
    finished_at: str | None = None

    def save(self, directory: Path) -> None:
        path = directory / STATUS_FILE
        partial = directory / RESERVED[1]
        partial.write_text(strict_json(asdict(self)) + "\n")
        partial.replace(path)

    @property
    def controller_gone(self) -> bool:
        """The controller ended without finishing (killed): its hosts' states are stale."""
        return self.finished_at is None and not pid_alive(self.controller_pid)


def load_state(directory: Path) -> FleetState:
    try:
        data: dict[str, Any] = strict_loads((directory / STATUS_FILE).read_text())
        hosts = [HostState(**h) for h in data.pop("hosts")]
        return FleetState(**data, hosts=hosts)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{directory / STATUS_FILE} cannot be read as a fleet status ({exc}); "
                         "was it written by `pgdyno fleet run`?") from None  # fmt: skip


def latest_state(workdir: Path) -> FleetState:
    """The state of the newest fleet run of a work directory (one sentence when there is none)."""
    found = fleet_dirs(workdir)
    if not found:
        raise UsageError(f"no fleet run in {workdir}: start one with `pgdyno fleet run`.")
    return load_state(found[0])


def fleet_dirs(workdir: Path) -> list[Path]:
    """The fleet runs of a work directory, newest first."""
    root = workdir / FLEETS_DIR
    found = [p for p in root.glob("*") if (p / STATUS_FILE).is_file()] if root.is_dir() else []
    return sorted(found, key=lambda p: (p / STATUS_FILE).stat().st_mtime, reverse=True)
