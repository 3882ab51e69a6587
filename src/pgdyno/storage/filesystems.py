"""What pgdyno knows of each filesystem (data/filesystems.toml), and the mkfs command line.

The table is data: the mkfs commands and their force flag, the Debian package, the kernel
modules, the types mount tries, and the options a plan may not pass. The functions here are
pure: the options a plan gives are checked, and an mkfs argv is assembled.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any

FILESYSTEMS_FILE = Path(str(resources.files("pgdyno") / "data" / "filesystems.toml"))


@dataclass(frozen=True)
class Refusal:
    pattern: str  # fnmatch, case-sensitive, against one option
    why: str


@dataclass(frozen=True)
class FsKind:
    """One [filesystem.NAME] entry of data/filesystems.toml."""

    name: str
    mkfs: tuple[tuple[str, ...], ...]  # candidate commands, first found wins
    force: str
    package: str
    modules: tuple[str, ...]
    mount_types: tuple[str, ...]
    min_size_bytes: int
    options: tuple[str, ...]
    image_options: tuple[str, ...]
    image_mount_options: str
    merged_flag: str
    refused: tuple[Refusal, ...]
    cite: str


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{FILESYSTEMS_FILE}: {where} must be a list of strings")
    return tuple(value)


def _refusals(value: Any, where: str) -> tuple[Refusal, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{FILESYSTEMS_FILE}: {where} must be a list of tables")
    return tuple(Refusal(str(entry["pattern"]), str(entry["why"])) for entry in value)


def _kind(name: str, row: dict[str, Any]) -> FsKind:
    where = f"filesystem.{name}"
    mkfs = row["mkfs"]
    if not isinstance(mkfs, list) or not mkfs:
        raise ValueError(f"{FILESYSTEMS_FILE}: {where}.mkfs must list commands")
    return FsKind(
        name=name,
        mkfs=tuple(_strings(command, f"{where}.mkfs") for command in mkfs),
        force=str(row["force"]),
        package=str(row["package"]),
        modules=_strings(row["modules"], f"{where}.modules"),
        mount_types=_strings(row["mount_types"], f"{where}.mount_types"),
        min_size_bytes=int(row["min_size_mib"]) * 2**20,
        options=_strings(row["options"], f"{where}.options"),
        image_options=_strings(row["image_options"], f"{where}.image_options"),
        image_mount_options=str(row["image_mount_options"]),
        merged_flag=str(row["merged_flag"]),
        refused=_refusals(row["refused"], f"{where}.refused"),
        cite=str(row["cite"]),
    )


_DATA = tomllib.loads(FILESYSTEMS_FILE.read_text())
KINDS: dict[str, FsKind] = {name: _kind(name, row) for name, row in _DATA["filesystem"].items()}
# Program -> the Debian package that provides it.
TOOLS: dict[str, str] = {str(k): str(v) for k, v in _DATA["tools"].items()}
MOUNT_REFUSED = _refusals(_DATA["mount"]["refused"], "mount.refused")


def _refused(option: str, refusals: tuple[Refusal, ...]) -> str | None:
    """Why a plan may not pass `option`, or None.

    >>> _refused("-d/etc", ()), _refused("noatime", MOUNT_REFUSED)
    ('it names a path', None)
    """
    if "/" in option:
        return "it names a path"
    for refusal in refusals:
        if fnmatchcase(option, refusal.pattern):
            return refusal.why
    return None


def mkfs_option_problems(kind: FsKind, options: tuple[str, ...], role: str) -> list[str]:
    """
    >>> mkfs_option_problems(KINDS["xfs"], ("-m", "reflink=1"), "data")
    []
    >>> mkfs_option_problems(KINDS["xfs"], ("-l", "logdev=sdb"), "wal")  # doctest: +ELLIPSIS
    ["the mkfs option 'logdev=sdb' for wal is refused (an external log names another ...
    """
    problems = []
    for option in options:
        why = _refused(option, kind.refused)
        if why is not None:
            problems.append(
                f"the mkfs option {option!r} for {role} is refused ({why}): leave it out."
            )
        elif option == kind.force:
            problems.append(
                f"the mkfs option {option!r} for {role} is pgdyno's to give: leave it out "
                "(a named device is overwritten only with destroy_device = true)."
            )
    return problems


def mount_option_problems(text: str, role: str) -> list[str]:
    """
    >>> mount_option_problems("noatime,nobarrier", "data")
    []
    >>> mount_option_problems("noatime,logdev=/dev/sdb", "wal")  # doctest: +ELLIPSIS
    ["the mount option 'logdev=/dev/sdb' for wal is refused (it names a path): leave it out."]
    """
    if not text:
        return []
    problems = []
    for option in text.split(","):
        if not option:
            why: str | None = "an empty option"
        elif any(char.isspace() for char in option):
            why = "it holds white space"
        else:
            why = _refused(option, MOUNT_REFUSED)
        if why is not None:
            problems.append(
                f"the mount option {option!r} for {role} is refused ({why}): leave it out."
            )
    return problems


def mount_options(kind: FsKind, request_options: str, *, image: bool) -> str:
    """pgdyno's mount options for a loop image, then the plan's (the last of a kind wins).

    >>> mount_options(KINDS["btrfs"], "noatime", image=True)
    'nodiscard,noatime'
    >>> mount_options(KINDS["btrfs"], "noatime", image=False)
    'noatime'
    """
    ours = kind.image_mount_options if image else ""
    return ",".join(part for part in (ours, request_options) if part)


def _merge_flag(options: list[str], flag: str) -> list[str]:
    """Join every value of `flag` into one, in order (mke2fs reads only its last -E).

    >>> _merge_flag(["-q", "-E", "a=0", "-L", "x", "-E", "b=1"], "-E")
    ['-q', '-E', 'a=0,b=1', '-L', 'x']
    """
    if not flag or options.count(flag) < 2:
        return options
    values: list[str] = []
    merged: list[str] = []
    at: int | None = None
    index = 0
    while index < len(options):
        if options[index] == flag and index + 1 < len(options):
            if at is None:
                at = len(merged)
            values.append(options[index + 1])
            index += 2
            continue
        merged.append(options[index])
        index += 1
    assert at is not None
    return [*merged[:at], flag, ",".join(values), *merged[at:]]


def mkfs_argv(
    kind: FsKind, command: tuple[str, ...], request_options: tuple[str, ...], target: str, *,
    image: bool, force: bool,
) -> list[str]:  # fmt: skip
    """The mkfs command line: the command, pgdyno's options, the plan's, then the target.

    >>> mkfs_argv(KINDS["ext4"], ("mkfs.ext4",), ("-L", "pg"), "/dev/loop0", image=True,
    ...           force=True)  # doctest: +NORMALIZE_WHITESPACE
    ['mkfs.ext4', '-F', '-q', '-E', 'lazy_itable_init=0,lazy_journal_init=0,nodiscard',
     '-L', 'pg', '/dev/loop0']
    """
    options = [*kind.options, *(kind.image_options if image else ()), *request_options]
    forced = [kind.force] if force else []
    return [*command, *forced, *_merge_flag(options, kind.merged_flag), target]
