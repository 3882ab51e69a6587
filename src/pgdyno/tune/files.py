"""`pgdyno tune --out DIR`: a Configuration as files a user can review and deploy by hand.

One file per place the settings go: a postgresql.conf include file and the equivalent
`ALTER SYSTEM` script, an /etc/sysctl.d/ file, a udev rule for the block queues, a tmpfiles.d
entry for transparent huge pages, and a README saying in which order to install them and how
to roll each back. Only files with settings are written; each starts with a header line
carrying `MARKER`, so a later run overwrites its own files and never a user's.

Rendering is pure (`render_files`); writing them is pgdyno.tune.out_dir's. Every value is
written exactly as `Setting.value` holds it, after checks that no value or name can break out
of its syntax (a line break, a quote in a udev value, a glob in a disk name): values come from
data/tune.toml or computed numbers, so a refusal means the knowledge base is wrong.
"""

from __future__ import annotations

import datetime
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pgdyno.errors import UsageError
from pgdyno.postgres.conf import check_name, quote_value
from pgdyno.tune.model import Configuration, Setting

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
_PREFIX = {"apply": "", "measure": "measure first: ", "review": "review first: "}

Renderer = Callable[["_Header", list[Setting]], str]


@dataclass(frozen=True, slots=True)
class _Header:
    generated_by: str
    date: str
    source: str
    profile: str

    def lines(self, comment: str, what: str, install: Iterable[str]) -> list[str]:
        """The header: MARKER on the first line, then what the file is and how to install it."""
        first = f"{MARKER} {self.generated_by}, {self.date}. Review before deploying."
        lines = [
            first,
            what,
            f"Advice of {self.source} for the profile {self.profile}.",
            "Install:",
        ]
        lines += [f"  {line}" for line in install]
        return [f"{comment} {line}" if comment else line for line in lines] + [""]


def render_files(
    config: Configuration, *, generated_by: str, generated_on: datetime.date | None = None
) -> dict[str, str]:
    """File name -> text for every file that has settings, and the README.

    `generated_by` names the program in each header ("pgdyno tune 0.1.0"); `generated_on`
    defaults to today.
    """
    date = (generated_on or datetime.date.today()).isoformat()
    header = _Header(_words(generated_by), date, _words(config.source), _words(config.profile))
    groups = _groups(config)
    renderers: dict[str, Renderer] = {
        PG_CONF: _pg_conf,
        ALTER_SQL: _alter_sql,
        SYSCTL: _sysctl,
        UDEV: _udev,
        THP: _thp,
    }
    files = {
        name: render(header, groups[name]) for name, render in renderers.items() if groups[name]
    }
    files[README] = _readme(header, config, groups)
    return files


def _groups(config: Configuration) -> dict[str, list[Setting]]:
    """The settings each file carries; host settings no file can carry go to the README."""
    pg = config.layer("postgresql")
    host = config.layer("host")
    return {
        PG_CONF: pg,
        ALTER_SQL: pg,
        SYSCTL: [s for s in host if _SYSCTL.fullmatch(s.name)],
        UDEV: config.layer("device"),
        THP: [s for s in host if _THP.fullmatch(s.name)],
        README: [s for s in host if not (_SYSCTL.fullmatch(s.name) or _THP.fullmatch(s.name))],
    }


# -- PostgreSQL ------------------------------------------------------------------------------


def _pg_conf(header: _Header, settings: list[Setting]) -> str:
    lines = header.lines(
        "#",
        "PostgreSQL settings: an include file for postgresql.conf.",
        [
            "copy this file into the directory of postgresql.conf, add at its end",
            f"  include_if_exists = '{PG_CONF}'",
            "then reload (SELECT pg_reload_conf();), or restart where a setting says so.",
            "postgresql.auto.conf (ALTER SYSTEM) overrides include files; what it sets:",
            "  SELECT name, setting FROM pg_settings WHERE sourcefile LIKE '%auto.conf';",
        ],
    )
    for s in settings:
        lines += _comment("#", _why(s))
        lines += _comment("#", _takes_effect(s))
        value = quote_value(_checked(s, s.value))
        lines.append(_prefixed("#", s, f"{_pg_name(s.name)} = {value}"))
        lines.append("")
    return _text(lines)


def _alter_sql(header: _Header, settings: list[Setting]) -> str:
    lines = header.lines(
        "--",
        "PostgreSQL settings as ALTER SYSTEM statements (the same as postgresql.pgdyno.conf).",
        [f"psql -v ON_ERROR_STOP=1 -f {ALTER_SQL}  (as a superuser; writes postgresql.auto.conf)"],
    )
    # The quoting below doubles quotes and leaves backslashes alone, as standard strings do.
    lines += ["SET standard_conforming_strings = on;", ""]
    for s in settings:
        lines += _comment("--", _why(s))
        value = "'" + _checked(s, s.value).replace("'", "''") + "'"
        statement = f"ALTER SYSTEM SET {_pg_name(s.name)} = {value};"
        lines.append(_prefixed("--", s, f"{statement}  -- takes effect: {s.takes_effect}"))
        lines.append("")
    lines.append("SELECT pg_reload_conf();")
    restart = _restart_names(settings)
    if restart:
        lines += _comment("--", f"Restart PostgreSQL for these to take effect: {restart}.")
    return _text(lines)


def _restart_names(settings: Iterable[Setting]) -> str:
    names = dict.fromkeys(
        s.name for s in settings if s.status == "apply" and s.takes_effect == "restart"
    )
    return ", ".join(names)


# -- Host and devices ---------------------------------------------------------------------------


def _sysctl(header: _Header, settings: list[Setting]) -> str:
    lines = header.lines(
        "#",
        "Kernel settings for /etc/sysctl.d/.",
        [f"install -m 644 {SYSCTL} /etc/sysctl.d/ && sysctl --system"],
    )
    for s in settings:
        lines += _comment("#", _why(s))
        lines.append(_prefixed("#", s, f"{s.name} = {_checked(s, s.value)}"))
        lines.append("")
    return _text(lines)


def _udev(header: _Header, settings: list[Setting]) -> str:
    lines = header.lines(
        "#",
        "Block queue settings of the disks under the data and WAL directories.",
        [
            f"install -m 644 {UDEV} /etc/udev/rules.d/ && udevadm control --reload &&",
            "  udevadm trigger --subsystem-match=block",
        ],
    )
    lines += _comment(
        "#", "Kernel names such as sda can change between boots: check them before installing."
    )
    lines.append("")
    for disk, on_disk in _by_disk(settings).items():
        for status in ("apply", "measure", "review"):
            chosen = [s for s in on_disk if s.status == status]
            if not chosen:
                continue
            for s in chosen:
                lines += _comment("#", f"{s.name}: {_why(s)}")
            attrs = ", ".join(f'ATTR{{queue/{s.name}}}="{_plain(s)}"' for s in chosen)
            rule = f'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="{disk}", {attrs}'
            lines += [_prefixed("#", chosen[0], rule), ""]
    return _text(lines)


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


def _thp(header: _Header, settings: list[Setting]) -> str:
    lines = header.lines(
        "#",
        "Transparent huge pages, set at every boot by systemd-tmpfiles.",
        [
            f"install -m 644 {THP} /etc/tmpfiles.d/ && systemd-tmpfiles --create {THP}",
            "or instead: transparent_hugepage=never on the kernel command line (GRUB_CMDLINE_LINUX",
            "in /etc/default/grub, then update-grub and reboot).",
        ],
    )
    for s in settings:
        lines += _comment("#", _why(s))
        path = f"{THP_DIR}/{s.name.removeprefix('transparent_hugepage/')}"
        lines += [_prefixed("#", s, f"w {path} - - - - {_plain(s)}"), ""]
    return _text(lines)


# -- README -------------------------------------------------------------------------------------


def _readme(header: _Header, config: Configuration, groups: Mapping[str, list[Setting]]) -> str:
    lines = header.lines("", "Files to review, install and roll back by hand.", _install(groups))
    lines += ["Files:"] + [f"  {name:24} {_ABOUT[name]}" for name in FILE_NAMES if groups[name]]
    lines += ["", "Roll back:", *(f"  {line}" for line in _rollback(groups))]
    unwritten = groups[README]
    if unwritten:
        lines += ["", "Host settings no file here can carry (set them by hand):"]
        lines += [f"  {_words(s.name)} = {_checked(s, s.value)}: {_why(s)}" for s in unwritten]
    left_out = [*config.notes, *(f"{k}: {v}" for k, v in config.unknown.items())]
    if left_out:
        lines += ["", "Left out:"] + [f"  {_words(item)}" for item in left_out]
    lines += [
        "",
        "Settings commented out with 'measure first' are offered for pgdyno tune --verify; those",
        "with 'review first' are right only on a dedicated database host.",
        "pgdyno tune --apply does all of this with a journal; pgdyno rollback undoes it exactly.",
    ]
    return _text(lines)


_ABOUT = {
    PG_CONF: "PostgreSQL settings, an include file for postgresql.conf",
    ALTER_SQL: "the same PostgreSQL settings as ALTER SYSTEM statements (use one of the two)",
    SYSCTL: "kernel settings for /etc/sysctl.d/ (huge pages, writeback, swappiness ...)",
    UDEV: "a udev rule for the disks' I/O scheduler and read-ahead",
    THP: "transparent huge pages off, for /etc/tmpfiles.d/",
    README: "this file",
}


def _install(groups: Mapping[str, list[Setting]]) -> list[str]:
    """The order matters: huge pages must be reserved before PostgreSQL restarts with
    huge_pages = on, and settings that need a restart come last."""
    steps: list[list[str]] = []
    if groups[SYSCTL]:
        steps.append([f"install -m 644 {SYSCTL} /etc/sysctl.d/ && sysctl --system"])
        if any(s.name == "vm.nr_hugepages" for s in groups[SYSCTL]):
            steps[-1].append("(first: huge pages must be reserved before PostgreSQL restarts)")
    if groups[THP]:
        steps.append([f"install -m 644 {THP} /etc/tmpfiles.d/ && systemd-tmpfiles --create {THP}"])
    if groups[UDEV]:
        steps.append(
            [
                f"install -m 644 {UDEV} /etc/udev/rules.d/ && udevadm control --reload &&",
                "  udevadm trigger --subsystem-match=block",
            ]
        )
    if groups[PG_CONF]:
        steps.append(
            [
                f"PostgreSQL, one of: include_if_exists = '{PG_CONF}' at the end of",
                f"postgresql.conf and a reload, or psql -v ON_ERROR_STOP=1 -f {ALTER_SQL}",
            ]
        )
        restart = _restart_names(groups[PG_CONF])
        if restart:
            steps.append([f"restart PostgreSQL (needed by {restart})"])
    lines: list[str] = []
    for n, (first, *more) in enumerate(steps, start=1):
        lines += [f"{n}. {first}", *(f"   {line}" for line in more)]
    return lines


def _rollback(groups: Mapping[str, list[Setting]]) -> list[str]:
    """Removing a file does not put a kernel value back until the next boot, so each layer
    says how to write the previous value (when it is known) now."""
    lines: list[str] = []
    pg = [s for s in groups[PG_CONF] if s.status == "apply"]
    if pg:
        lines.append(f"include file: remove the include_if_exists line (or {PG_CONF}), reload.")
        lines.append("ALTER SYSTEM: run these, then SELECT pg_reload_conf(); and restart as above")
        lines.append(
            "  (RESET falls back to postgresql.conf, not to an earlier ALTER SYSTEM value)"
        )
        names = dict.fromkeys(_pg_name(s.name) for s in pg)
        lines += [f"  ALTER SYSTEM RESET {name};" for name in names]
    sysctls = _applied(groups[SYSCTL])
    if sysctls:
        lines.append(f"sysctl: rm /etc/sysctl.d/{SYSCTL}, then put the previous values back:")
        lines += [f"  {_sysctl_back(s)}" for s in sysctls]
    thp = _applied(groups[THP])
    if thp:
        lines.append(f"THP: rm /etc/tmpfiles.d/{THP}, then put the previous values back:")
        lines += [_echo_back(s, f"{THP_DIR}/{s.name.split('/')[-1]}") for s in thp]
    queues = _applied(groups[UDEV])
    if queues:
        lines.append(f"udev: rm /etc/udev/rules.d/{UDEV}; udevadm control --reload; then:")
        lines += [_echo_back(s, f"/sys/block/{s.device}/queue/{s.name}") for s in queues]
    return lines


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
        return f"  echo PREVIOUS > {path}  (previous value unknown)"
    return f"  echo {previous} > {path}"


def _previous(s: Setting) -> str | None:
    """The value in effect before, when it is a plain word safe to show in a command."""
    return s.current if s.current is not None and _PLAIN.fullmatch(s.current) else None


# -- Text helpers -------------------------------------------------------------------------------


def _why(s: Setting) -> str:
    current = f" (in effect now: {_words(s.current)})" if s.current is not None else ""
    return _words(s.why) + current


def _takes_effect(s: Setting) -> str:
    return f"takes effect: {s.takes_effect}"


def _prefixed(comment: str, s: Setting, line: str) -> str:
    prefix = _PREFIX[s.status]
    return f"{comment} {prefix}{line}" if prefix else line


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


def _text(lines: list[str]) -> str:
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"
