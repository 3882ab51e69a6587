"""huge_pages and vm.nr_hugepages from the server's own count of its shared memory.

Shared memory is more than shared_buffers: every connection's slots and locks, WAL buffers,
and in PostgreSQL 18 the asynchronous I/O state, which grow with max_connections. Only the
server knows the sum, and PostgreSQL 15+ tells it without starting:
`postgres -C shared_memory_size_in_huge_pages` with the configuration being written
(postgres/shmem_probe.py runs it with the target version's own binary; `probe_settings` says
with which settings). `sized` then decides, purely:

- the figure is known and the host already holds at least that many pages: huge_pages = on,
  vm.nr_hugepages kept as it is;
- the figure is known, the pages are not reserved yet: vm.nr_hugepages = the figure and
  huge_pages = try, its reason saying when to set on (with on, a server whose pages fall short
  does not start; with try and the exact figure reserved, the server maps them, so no page is
  reserved for nothing);
- no figure (no binary of that version at hand, PostgreSQL 14, or postgres -C refused):
  huge_pages = try, nothing reserved, and a note with the exact command that gives it.

The table, --json and the files all show this one Configuration. `tune --apply` reserves the
pages the running server reports after its restart and only then sets on (tune/apply.py).
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from pgdyno.postgres.settings import SettingMeta
from pgdyno.tune.model import Configuration, Setting

PAGES = "vm.nr_hugepages"
FIGURE = "shared_memory_size_in_huge_pages"
FIRST_MAJOR = 15


@dataclass(frozen=True)
class PagesFigure:
    """What the target version's binary said: `pages`, or None and `why` it is not known;
    `command` is what gives the figure, to print when pgdyno could not run it."""

    pages: int | None
    source: str  # "PostgreSQL 18.6 (postgres -C)", or why it is not known
    command: str


@cache
def shared_memory_settings() -> tuple[str, ...]:
    """The settings that size shared memory (data/memory.toml)."""
    text = (resources.files("pgdyno") / "data" / "memory.toml").read_text(encoding="utf-8")
    return tuple(tomllib.loads(text)["shared_memory"]["settings"])


def wants_pages(config: Configuration) -> bool:
    """Whether the configuration reserves huge pages (so the figure is worth computing)."""
    return any(s.layer == "host" and s.name == PAGES for s in config.settings)


def probe_settings(
    config: Configuration, current: Mapping[str, str], meta: Mapping[str, SettingMeta]
) -> dict[str, str]:
    """The settings postgres -C sizes shared memory with: those the configuration writes,
    then the target's own values of the rest that size it, then the host's huge page size.

    >>> from pgdyno.records.tune import TuneFacts
    >>> config = Configuration("pgdyno", "oltp", (
    ...     Setting("postgresql", "shared_buffers", "2GB", "w"),
    ...     Setting("postgresql", "huge_pages", "on", "w"),
    ...     Setting("postgresql", "io_method", "io_uring", "w", status="measure"),
    ... ), TuneFacts("oltp", 100, huge_page=2 * 1024**2))
    >>> probe_settings(config, {"max_locks_per_transaction": "256", "work_mem": "4MB"}, {})
    {'shared_buffers': '2GB', 'max_locks_per_transaction': '256', 'huge_page_size': '2048kB'}
    """
    values = {n: v for n, v in config.pg_values().items() if n != "huge_pages"}
    libraries = {
        lib.strip() for lib in current.get("shared_preload_libraries", "").split(",") if lib.strip()
    }
    for name, value in current.items():
        ours = name in shared_memory_settings() or name.partition(".")[0] in libraries
        if ours and name not in values and (not meta or name in meta or "." in name):
            values[name] = value
    if values.get("huge_page_size", "0").rstrip("kMGTB") == "0" and config.facts.huge_page > 0:
        values["huge_page_size"] = f"{config.facts.huge_page // 1024}kB"
    return values


def probe_command(major: int | None, settings: Mapping[str, str]) -> str:
    """What a user runs for the figure, as the postgres user on a stopped data directory.

    >>> probe_command(18, {"shared_buffers": "2GB"})
    'postgres -D DATADIR -C shared_memory_size_in_huge_pages -c shared_buffers=2GB'
    >>> probe_command(14, {})[:40]
    'grep ^VmPeak /proc/$(head -1 DATADIR/pos'
    """
    if major is not None and major < FIRST_MAJOR:
        return "grep ^VmPeak /proc/$(head -1 DATADIR/postmaster.pid)/status"
    argv = ["postgres", "-D", "DATADIR", "-C", FIGURE]
    for name, value in settings.items():
        argv += ["-c", f"{name}={value}"]
    return shlex.join(argv)


def sized(config: Configuration, figure: PagesFigure) -> Configuration:
    """huge_pages and vm.nr_hugepages as the figure allows (see the module's docstring)."""
    pages = next((s for s in config.settings if s.layer == "host" and s.name == PAGES), None)
    if pages is None:
        return config
    if pages.status == "todo":  # for the server's own host (offline): the exact figure, if had
        return _todo(config, pages, figure)
    if figure.pages is None:
        return _unknown(config, figure)
    held = int(pages.current) if pages.current and pages.current.isdigit() else None
    counted = f"{figure.pages} pages, {FIGURE} of {figure.source} for this configuration"
    if held is not None and held >= figure.pages:
        reserve = replace(pages, value=str(held), why=f"{pages.why}: {held} reserved, enough for "
                          f"the {counted}")  # fmt: skip
        return _replaced(
            config, reserve, "on", f"the {held} reserved huge pages hold the {counted}"
        )
    reserve = replace(pages, value=str(figure.pages), why=f"{pages.why}: {counted}")
    why = (
        f"try until the {figure.pages} pages are reserved ({held or 0} now): with on a server "
        f"whose pages fall short does not start; once vm.nr_hugepages shows {figure.pages} "
        "(HugePages_Total in /proc/meminfo), set huge_pages = on"
    )
    return _replaced(config, reserve, "try", why)


def _todo(config: Configuration, pages: Setting, figure: PagesFigure) -> Configuration:
    """The to-do of a host pgdyno cannot reach: its estimate, or the exact count when had."""
    if figure.pages is None:
        return config
    exact = replace(pages, value=str(figure.pages), why=(
        f"reserve {figure.pages} huge pages ({FIGURE} of {figure.source} for this configuration), "
        "then set huge_pages = on and restart"
    ))  # fmt: skip
    settings = tuple(exact if s is pages else s for s in config.settings)
    return replace(config, settings=settings)


def _unknown(config: Configuration, figure: PagesFigure) -> Configuration:
    why = f"no huge pages reserved: {figure.source}"
    note = (
        f"{why}; `{figure.command}` gives the pages this configuration needs (as the postgres "
        "user, on a stopped data directory of the target's version: a new one from initdb "
        "will do); reserve that many in vm.nr_hugepages, then set huge_pages = on."
    )
    if figure.command.startswith("grep"):
        note = (
            f"{why}; start the server with this configuration and huge_pages = try, then "
            f"`{figure.command}` gives its shared memory in kB: divide by the huge page size "
            "(Hugepagesize in /proc/meminfo), reserve that many pages plus one in "
            "vm.nr_hugepages, then set huge_pages = on (PostgreSQL 14 documentation, Linux Huge "
            "Pages)."
        )
    settings = tuple(s for s in config.settings if not (s.layer == "host" and s.name == PAGES))
    kept = replace(config, settings=settings)
    return replace(_replaced(kept, None, "try", why), notes=(*config.notes, note))


def _replaced(config: Configuration, pages: Setting | None, mode: str, why: str) -> Configuration:
    settings = []
    for s in config.settings:
        if pages is not None and s.layer == "host" and s.name == PAGES:
            s = pages
        elif s.layer == "postgresql" and s.name == "huge_pages":
            s = replace(s, value=mode, why=f"{s.why}; {mode}: {why}")
        settings.append(s)
    return replace(config, settings=tuple(settings))
