"""What `pgdyno tune` refuses before it computes anything: values no server would take, and
options that would do nothing as asked (one sentence each, before a sandbox or a plan is made).

Pure functions of what was typed and of the target version's facts; the CLI calls them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.postgres.binaries import SUPPORTED_MAJORS

# --ram: digits, an optional fraction, a unit PostgreSQL writes; nothing else (no 0x, no
# exponent, no inf): a size a person types.
_RAM = re.compile(r"(\d+(?:\.\d+)?)\s*(kB|MB|GB|TB)")
_UNIT = {"kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
RAM_MIN = 1024**2  # pgtune's form refuses less; no server runs in less either
RAM_MAX = 1024 * 1024**4  # 1 PB: beyond any single machine

# The options that act only with --verify, and those that act only on a server.
VERIFY_ONLY = {
    "ladder": "--ladder", "workloads": "--workload", "scale": "--scale", "clients": "--clients",
    "duration": "--duration", "warmup": "--warmup", "budget": "--budget",
    "precision": "--precision",
}  # fmt: skip
SERVER_ONLY = {
    "restart_command": "--restart-command", "data_dir": "--data-dir", "pg_bin": "--pg-bin",
}  # fmt: skip

# The server refuses to start unless max_connections exceeds superuser_reserved_connections
# (3 by default) plus reserved_connections (0 by default, PostgreSQL 16+).
SUPERUSER_RESERVED = 3
# MAX_BACKENDS (2^18 - 1): max_connections plus the autovacuum workers, the launcher, the
# background workers and the WAL senders must stay within it, or the server does not start.
MAX_BACKENDS = 262143
MAX_WAL_SENDERS_DEFAULT = 10
MAX_WORKER_PROCESSES_DEFAULT = 8


def parse_ram(text: str) -> int:
    """--ram: a size with a unit as PostgreSQL writes it (64GB, 512MB, 1.5TB), in bytes.

    >>> parse_ram("64GB"), parse_ram("512MB"), parse_ram("1.5GB")
    (68719476736, 536870912, 1610612736)
    """
    match = _RAM.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"--ram {text!r} is not a size: give it with a unit, e.g. 64GB or 512MB.")
    number = float(match.group(1)) * _UNIT[match.group(2)]
    if not math.isfinite(number) or number > RAM_MAX:
        raise UsageError(f"--ram {text!r} is more than any machine has: give at most 1024TB.")
    if number < RAM_MIN:
        raise UsageError(f"--ram {text!r} is too little to run PostgreSQL: give at least 1MB.")
    return int(number)


def check_pg_version(version: object) -> None:
    """--pg-version names a version pgdyno knows (its recorded pg_settings, its binaries)."""
    if version is not None and version not in SUPPORTED_MAJORS:
        raise UsageError(
            f"--pg-version {version} is not a version pgdyno knows: give "
            f"{SUPPORTED_MAJORS.start} to {SUPPORTED_MAJORS.stop - 1}."
        )


def out_dir(text: object) -> Path | None:
    """--out DIR: a directory; the empty string is not one (it would mean the current one)."""
    if text is None:
        return None
    text = str(text)
    if not text.strip():
        raise UsageError("--out needs a directory: give its path, e.g. --out tuned/.")
    return Path(text)


def check_options(typed: Collection[str], *, offline: bool, verify: bool) -> None:
    """Refuse options typed on the command line that would do nothing here.

    `typed` holds the option names (click's parameter names) the user gave explicitly.
    """
    if offline:
        for name, flag in {**SERVER_ONLY, **VERIFY_ONLY}.items():
            if name in typed:
                raise UsageError(
                    f"{flag} does nothing offline (--ram or --from describes a machine, no "
                    f"server is touched): leave {flag} out, or tune a server with --sandbox "
                    "or --dsn."
                )
        if verify:
            raise UsageError("--verify measures a server: give --sandbox (not --ram).")
        return
    if not verify:
        for name, flag in VERIFY_ONLY.items():
            if name in typed:
                raise UsageError(f"{flag} only acts with --verify: add --verify or leave it out.")


def check_connections(
    connections: int | None, workers: Mapping[str, int], major: int | None
) -> None:
    """A max_connections the target version starts with, or one sentence.

    `workers` holds the configuration's autovacuum_max_workers and max_worker_processes (their
    defaults when absent); an unknown version is held to the strictest bound (18's).
    """
    if connections is None:
        return
    if connections <= SUPERUSER_RESERVED:
        raise UsageError(
            f"--connections {connections} is too few: PostgreSQL refuses to start unless "
            f"max_connections exceeds superuser_reserved_connections ({SUPERUSER_RESERVED}); "
            f"give at least {SUPERUSER_RESERVED + 1}."
        )
    most = most_connections(workers, major or SUPPORTED_MAJORS[-1])
    if connections > most:
        server = f"PostgreSQL {major}" if major else "PostgreSQL"
        raise UsageError(
            f"--connections {connections} is more than {server} starts with: "
            f"max_connections plus its autovacuum, background-worker and WAL-sender slots must "
            f"stay within {MAX_BACKENDS}; give at most {most}."
        )


def most_connections(workers: Mapping[str, int], major: int) -> int:
    """The largest max_connections the server starts with beside these workers.

    PostgreSQL 18 reserves autovacuum_worker_slots (16 by default) instead of
    autovacuum_max_workers, and one slot more for the slot-sync worker.

    >>> most_connections({}, 17), most_connections({}, 18)
    (262121, 262107)
    """
    autovacuum = 16 if major >= 18 else workers.get("autovacuum_max_workers", 3)
    special = 2 if major >= 18 else 1  # the autovacuum launcher (and the slot-sync worker)
    background = workers.get("max_worker_processes", MAX_WORKER_PROCESSES_DEFAULT)
    return MAX_BACKENDS - autovacuum - special - background - MAX_WAL_SENDERS_DEFAULT
