"""What a wait event or a process type means, for the people reading a run (data/wait_events.toml).

`describe_event("IO:WalSync")` gives one line of what the wait means and what it usually says
about a benchmark; `event_docs` the PostgreSQL documentation table that lists it. Process types
(``io worker``, ``checkpointer``...) are described too, under their backend_type. Pure apart
from `wait_events()`, which reads the packaged file once.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pgdyno.errors import PgdynoError

__all__ = ["WaitEventsError", "describe_event", "event_docs", "parse_wait_events", "wait_events"]

EVENTS_FILE = Path(str(resources.files("pgdyno") / "data" / "wait_events.toml"))
DOCS = "https://www.postgresql.org/docs/"


class WaitEventsError(PgdynoError):
    """The wait-event file is malformed: names the entry and the key."""


@dataclass(frozen=True, slots=True)
class Described:
    name: str  # "IO:WalSync", or a backend_type ("io worker")
    means: str  # one line
    docs: str  # the PostgreSQL documentation page, with its anchor


def _entry(entry: Any, where: str, is_event: bool) -> Described:
    if not isinstance(entry, dict) or set(entry) != {"name", "means", "docs"}:
        raise WaitEventsError(f"{where}: give exactly name, means and docs.")
    if not all(isinstance(value, str) and value.strip() for value in entry.values()):
        raise WaitEventsError(f"{where}: name, means and docs must be non-empty text.")
    name, means, docs = entry["name"], entry["means"], entry["docs"]
    if is_event and len(name.split(":")) != 2:
        raise WaitEventsError(f"{where}: an event's name is <type>:<event>, not {name!r}.")
    if not docs.startswith(DOCS) or "\n" in means:
        raise WaitEventsError(f"{where}: cite a page under {DOCS}, in one line.")
    return Described(name, means, docs)


def parse_wait_events(text: str, origin: str = "wait_events.toml") -> dict[str, Described]:
    """The entries of a wait-event file's text by lower-case name; WaitEventsError if malformed.

    >>> parse_wait_events('[[event]]\\nname = "IO:WalSync"\\nmeans = "m"\\ndocs = "' + DOCS + '"')
    {'io:walsync': Described(name='IO:WalSync', means='m', docs='https://www.postgresql.org/docs/')}
    >>> parse_wait_events('[[event]]\\nname = "WalSync"\\nmeans = "m"\\ndocs = "' + DOCS + '"')
    Traceback (most recent call last):
    pgdyno.catalogs.wait_events.WaitEventsError: wait_events.toml: event 1: an event's name is ...
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WaitEventsError(f"{origin} is not valid TOML ({exc}).") from None
    unknown = sorted(set(data) - {"event", "process"})
    if unknown:
        raise WaitEventsError(
            f"{origin}: unknown table {unknown[0]!r}; use [[event]] or [[process]]."
        )
    out: dict[str, Described] = {}
    for kind in ("event", "process"):
        for index, entry in enumerate(data.get(kind) or []):
            described = _entry(entry, f"{origin}: {kind} {index + 1}", kind == "event")
            key = described.name.lower()
            if key in out:
                raise WaitEventsError(f"{origin}: {described.name!r} is listed twice.")
            out[key] = described
    return out


@cache
def wait_events() -> dict[str, Described]:
    """The packaged file's entries, read once."""
    return parse_wait_events(EVENTS_FILE.read_text(), str(EVENTS_FILE))


def _find(event: str) -> Described | None:
    """The entry of "Type:Event" (any case, spaces around the colon allowed) or of a process
    type (spaces or underscores: "io worker", "io_worker")."""
    name = ":".join(part.strip() for part in event.strip().split(":")).lower()
    entries = wait_events()
    return entries.get(name) or entries.get(name.replace("_", " "))


def describe_event(event: str) -> str | None:
    """One line of what a wait event ("Type:Event") or a process type means; None if unknown.

    >>> describe_event("IO:WalSync").split(":")[0]
    'The process waits until writes to a WAL file are safely on disk'
    >>> describe_event("lwlock:walinsert").startswith("The process waits for its turn to copy WAL")
    True
    >>> describe_event("io_worker").startswith("Carries out other processes' asynchronous reads")
    True
    >>> describe_event("IO:NoSuchEvent") is None
    True
    """
    found = _find(event)
    return None if found is None else found.means


def event_docs(event: str) -> str | None:
    """The PostgreSQL documentation page (with anchor) that lists an event or process type.

    >>> event_docs("Activity:IoWorkerMain")
    'https://www.postgresql.org/docs/current/monitoring-stats.html#WAIT-EVENT-ACTIVITY-TABLE'
    """
    found = _find(event)
    return None if found is None else found.docs
