"""`pgdyno tune --out DIR`: a Configuration as files a user can review and deploy by hand.

One file per place the settings go: a postgresql.conf include file and the equivalent
`ALTER SYSTEM` script, an /etc/sysctl.d/ file, a udev rule for the block queues, a tmpfiles.d
entry for transparent huge pages, and a README saying in which order to install them and how
to roll each back. Only files with settings are written; each starts with a header line
carrying `MARKER`, so a later run overwrites its own files and never a user's.

Rendering is pure (`render_files`); writing them is pgdyno.tune.out_dir's. The text of each
file is a Jinja2 template (templates/<file name>.j2, autoescaping off: these are not HTML);
this module computes what they show. Every value is written exactly as `Setting.value` holds
it, after checks that no value or name can break out of its syntax (a quote in a udev value, a
glob in a disk name), and every value a template shows passes `_one_line`, so none can end its
line and start one of its own: values come from data/tune.toml or computed numbers, so a
refusal means the knowledge base is wrong.
"""

from __future__ import annotations

import datetime
import re
import textwrap
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import jinja2

from pgdyno.errors import UsageError
from pgdyno.postgres.conf import check_name, quote_value
from pgdyno.templating import template_environment
from pgdyno.tune.model import GROUPS, Configuration, Group, Setting

MARKER = "pgdyno-generated:"
PG_CONF = "postgresql.pgdyno.conf"
ALTER_SQL = "alter-system.sql"
SYSCTL = "99-pgdyno.conf"
UDEV = "60-pgdyno-block.rules"
THP = "pgdyno-thp.conf"
README = "README.txt"
FILE_NAMES = (PG_CONF, ALTER_SQL, SYSCTL, UDEV, THP, README)
WIDTH = 96
THP_DIR = "/sys/kernel/mm/transparent_hugepage"

_SYSCTL = re.compile(r"[a-z][a-z0-9_]*(\.[A-Za-z0-9_-]+)+")
_THP = re.compile(r"transparent_hugepage/[a-z_]+")
_DISK = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")  # vda, nvme0n1, dm-0; no glob or quote
_QUEUE = re.compile(r"[a-z][a-z0-9_]*")
_PLAIN = re.compile(r"[A-Za-z0-9_.+-]+")  # what a udev or tmpfiles value may hold
_PREFIX = {"apply": "", "measure": "measure first: ", "review": "review first: ",
           "todo": "to do on the server's host: "}  # fmt: skip

# How the templates (templates/<file name>.j2) name each file: files.sysctl, groups.udev ...
_KEYS = {PG_CONF: "pg_conf", ALTER_SQL: "alter_sql", SYSCTL: "sysctl", UDEV: "udev", THP: "thp",
         README: "readme"}  # fmt: skip


def render_files(
    config: Configuration, *, generated_by: str, generated_on: datetime.date | None = None
) -> dict[str, str]:
    """File name -> text for every file that has settings, and the README.

    `generated_by` names the program in each header ("pgdyno tune 0.1.0"); `generated_on`
    defaults to today. The text is in templates/<file name>.j2; what they show is checked here.
    """
    common = {
        "marker": MARKER,
        "generated_by": _words(generated_by),
        "date": (generated_on or datetime.date.today()).isoformat(),
        "source": _words(config.source),
        "profile": _words(config.profile),
        "files": {key: name for name, key in _KEYS.items()},
        "thp_dir": THP_DIR,
    }
    groups = _groups(config)
    disks = _disks(groups[UDEV])  # checked before any file is rendered
    files = {}
    for name in (PG_CONF, ALTER_SQL, SYSCTL, UDEV, THP):
        if groups[name]:
            restart = _restart_names(groups[name])
            files[name] = _render(name, common, settings=groups[name], disks=disks,
                                  restart=restart, sections=_sections(groups[name]))  # fmt: skip
    files[README] = _render(README, common, **_readme(config, groups))
    return files


def _render(name: str, common: Mapping[str, Any], **context: Any) -> str:
    text = _environment().get_template(f"{name}.j2").render(**common, **context)
    return text.rstrip("\n") + "\n"


@cache
def _environment() -> jinja2.Environment:
    """Config files, not HTML: no autoescaping. Every value a template shows goes through
    `_one_line`, so none can end a line and start one of its own, whatever the template."""
    return template_environment(
        "pgdyno.tune",
        finalize=_one_line,
        filters={
            "why": _why, "comment": lambda text, mark: _comment(mark, text), "prefix": _prefix,
            "pg_name": _pg_name, "conf_value": _conf_value, "sql_value": _sql_value,
            "plain": _plain, "checked": lambda s: _checked(s, s.value), "words": _words,
            "sysctl_back": _sysctl_back, "echo_back": _echo_back,
        },
    )  # fmt: skip


def _one_line(value: object) -> object:
    """The last guard of every value shown: no line break or other control character.

    >>> _one_line("4GB")
    '4GB'
    >>> _one_line("4GB\\nshared_buffers = 1TB")
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: '4GB\\nshared_buffers = 1TB' holds a control character (such as a \
line break) that would start a line of its own in a configuration file: fix it in the tune \
knowledge.
    """
    if _has_control(str(value)):
        raise UsageError(
            f"{str(value)!r} holds a control character (such as a line break) that would start "
            "a line of its own in a configuration file: fix it in the tune knowledge."
        )
    return value


def _groups(config: Configuration) -> dict[str, list[Setting]]:
    """The settings each file carries; host settings no file can carry go to the README, and
    so do those of the host's administrator (status "host": the server runs in a container)."""
    pg = config.layer("postgresql")
    host = [s for s in config.layer("host") if s.status != "host"]
    return {
        PG_CONF: pg,
        ALTER_SQL: pg,
        SYSCTL: [s for s in host if _SYSCTL.fullmatch(s.name)],
        UDEV: [s for s in config.layer("device") if s.status != "host"],
        THP: [s for s in host if _THP.fullmatch(s.name)],
        README: [s for s in host if not (_SYSCTL.fullmatch(s.name) or _THP.fullmatch(s.name))],
    }


# The heading of each group's section in postgresql.pgdyno.conf and alter-system.sql (none for
# the performance settings, which come first).
SECTION_HEADINGS: dict[Group, tuple[str, ...]] = {
    "performance": (),
    "observability": (
        "-- Observability: logging and I/O timing. They change no plan and no write, only what "
        "the server tells; delete this section, or run pgdyno tune --no-observability, to take "
        "the performance settings alone. --",
    ),
}


def _sections(settings: list[Setting]) -> list[tuple[tuple[str, ...], list[Setting]]]:
    """The settings of a file by group, each group with its heading; empty groups left out."""
    return [
        (SECTION_HEADINGS[group], chosen)
        for group in GROUPS
        if (chosen := [s for s in settings if s.group == group])
    ]


def _restart_names(settings: Iterable[Setting]) -> str:
    """The applied settings that need a restart and change something: one whose value is in
    effect already (`Setting.changes` false) asks for no restart."""
    names = dict.fromkeys(
        s.name
        for s in settings
        if s.status == "apply" and s.takes_effect == "restart" and s.changes
    )
    return ", ".join(names)


def _disks(settings: list[Setting]) -> list[tuple[str, list[list[Setting]]]]:
    """Each disk with its settings in groups of one status: one udev rule per group."""
    found: list[tuple[str, list[list[Setting]]]] = []
    for disk, on_disk in _by_disk(settings).items():
        by_status = [[s for s in on_disk if s.status == status] for status in _PREFIX]
        found.append((disk, [chosen for chosen in by_status if chosen]))
    return found


def _by_disk(settings: list[Setting]) -> dict[str, list[Setting]]:
    disks: dict[str, list[Setting]] = {}
    for s in settings:
        disk = s.device or ""
        if not _DISK.fullmatch(disk):
            raise UsageError(
                f"{disk!r} is not a disk name a udev rule can match safely: name a disk such as "
                "vda or nvme0n1."
            )
        if not _QUEUE.fullmatch(s.name):
            raise UsageError(f"{s.name!r} is not a block queue setting: use e.g. read_ahead_kb.")
        disks.setdefault(disk, []).append(s)
    return disks


# -- README -------------------------------------------------------------------------------------


def _readme(config: Configuration, groups: Mapping[str, list[Setting]]) -> dict[str, Any]:
    """What README.txt.j2 shows: the install steps' conditions, the files, the rollback."""
    pg_applied = _applied(groups[PG_CONF])
    return {
        "groups": {_KEYS[name]: bool(settings) for name, settings in groups.items()},
        "reserves_huge_pages": any(s.name == "vm.nr_hugepages" for s in groups[SYSCTL]),
        "restart": _restart_names(groups[PG_CONF]),
        # README.txt is listed when groups[README] (host settings no file carries) is not
        # empty: kept as it was, although the file is always written.
        "listed": [(n, _ABOUT[n]) for n in FILE_NAMES if groups[n]],
        "pg_reset": list(dict.fromkeys(_pg_name(s.name) for s in pg_applied)),
        "applied": {_KEYS[n]: _applied(groups[n]) for n in (SYSCTL, THP, UDEV)},
        "unwritten": groups[README],
        "host_admin": [s for s in config.settings if s.status == "host"],
        "container": _words(config.facts.container or "container"),
        "left_out": [*config.notes, *(f"{k}: {v}" for k, v in config.unknown.items())],
    }


_ABOUT = {
    PG_CONF: "PostgreSQL settings, an include file for postgresql.conf",
    ALTER_SQL: "the same PostgreSQL settings as ALTER SYSTEM statements (use one of the two)",
    SYSCTL: "kernel settings for /etc/sysctl.d/ (huge pages, writeback, swappiness ...)",
    UDEV: "a udev rule for the disks' I/O scheduler and read-ahead",
    THP: "transparent huge pages off, for /etc/tmpfiles.d/",
    README: "this file",
}


def _applied(settings: Iterable[Setting]) -> list[Setting]:
    return [s for s in settings if s.status == "apply"]


def _sysctl_back(s: Setting) -> str:
    """
    >>> _sysctl_back(Setting("host", "vm.dirty_bytes", "1", "", current="0"))
    'sysctl -w vm.dirty_ratio=PREVIOUS  (vm.dirty_bytes was 0: the ratio was in effect)'
    """
    previous = _previous(s)
    if previous is None:
        return f"sysctl -w {s.name}=PREVIOUS  (previous value unknown)"
    if s.name.endswith("_bytes") and previous == "0":  # writing 0 is refused: set the ratio
        ratio = s.name.removesuffix("_bytes") + "_ratio"
        return f"sysctl -w {ratio}=PREVIOUS  ({s.name} was 0: the ratio was in effect)"
    return f"sysctl -w {s.name}={previous}"


def _echo_back(s: Setting, path: str) -> str:
    previous = _previous(s)
    if previous is None:
        return f"echo PREVIOUS > {path}  (previous value unknown)"
    return f"echo {previous} > {path}"


def _previous(s: Setting) -> str | None:
    """The value in effect before, when it is a plain word safe to show in a command."""
    return s.current if s.current is not None and _PLAIN.fullmatch(s.current) else None


# -- Text helpers -------------------------------------------------------------------------------


def _why(s: Setting) -> str:
    current = f" (in effect now: {_words(s.current)})" if s.current is not None else ""
    return _words(s.why) + current


def _prefix(s: Setting, comment: str) -> str:
    """What starts a setting's line: nothing when applied, else a comment saying why not."""
    prefix = _PREFIX[s.status]
    return f"{comment} {prefix}" if prefix else ""


def _conf_value(s: Setting) -> str:
    return quote_value(_checked(s, s.value))


def _sql_value(s: Setting) -> str:
    """A standard string (standard_conforming_strings = on): quotes doubled, backslashes kept."""
    return "'" + _checked(s, s.value).replace("'", "''") + "'"


def _comment(comment: str, text: str) -> list[str]:
    """`text` wrapped at WIDTH columns as comment lines.

    >>> [len(line) for line in _comment("#", "a word " * 30)]
    [94, 92, 27]
    """
    width = WIDTH - len(comment) - 1
    return [f"{comment} {line}" for line in textwrap.wrap(_words(text), width)]


def _words(text: str) -> str:
    """Text on one line: whitespace (line breaks too) collapsed, other control characters
    refused, so no comment can end early and start a line of its own.

    >>> _words("two\\nlines")
    'two lines'
    """
    words = " ".join(text.split())
    if _has_control(words):
        raise UsageError(f"{words!r} holds a control character: remove it from the tune knowledge.")
    return words


def _checked(s: Setting, value: str) -> str:
    if _has_control(value) or value != value.strip() or not value:
        raise UsageError(
            f"the value {value!r} of {s.key} is empty, padded or holds a control character (such "
            "as a line break), which no configuration file can hold: fix it in the tune knowledge."
        )
    return value


def _pg_name(name: str) -> str:
    """conf.check_name's pattern ends in `$`, which lets a final line break through."""
    if _has_control(name):
        raise UsageError(f"{name!r} is not a PostgreSQL setting name: use names like work_mem.")
    return check_name(name)


def _plain(s: Setting) -> str:
    """A value for udev and tmpfiles.d, where a quote or a space would change the line's meaning."""
    if not _PLAIN.fullmatch(s.value):
        raise UsageError(
            f"the value {s.value!r} of {s.key} is not a plain word a udev rule or tmpfiles.d entry "
            "can hold: use letters, digits, '_', '.', '+' or '-'."
        )
    return s.value


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or c == "\x7f" for c in text)
