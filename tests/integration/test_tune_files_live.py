"""The PostgreSQL files of `pgdyno tune --out` on a real server: `alter-system.sql` runs in
psql as its header says and sets every value, and the include file parses without an error.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import wait_for
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.tune.files import ALTER_SQL, PG_CONF, render_files
from pgdyno.tune.model import Configuration, Setting
from pgdyno.tune.out_dir import write_files

# Values a reload puts in effect, one with a quote; one that needs a restart; one to measure.
RELOADABLE = {
    "application_name": "it's pgdyno",
    "work_mem": "16MB",
    "random_page_cost": "1.1",
    "jit": "off",
    "checkpoint_timeout": "15min",
}
CONFIG = Configuration(
    "pgdyno",
    "oltp",
    (
        *(Setting("postgresql", n, v, f"why {n}") for n, v in RELOADABLE.items()),
        Setting("postgresql", "shared_buffers", "256MB", "why", takes_effect="restart"),
        Setting("postgresql", "io_method", "sync", "why", takes_effect="restart", status="measure"),
    ),
)
# What pg_file_settings shows: each value, with no error but PostgreSQL's own words for a value
# that waits for a restart; io_method is commented out (status measure).
EXPECTED = {
    **{name: (value, None) for name, value in RELOADABLE.items()},
    "shared_buffers": ("256MB", "setting could not be applied"),
}


@pytest.fixture
def admin(box: Sandbox) -> Iterator[Client]:
    """A superuser session; every ALTER SYSTEM value is reset afterwards, pass or fail."""
    with connect(box.conninfo()) as client:
        try:
            yield client
        finally:
            client.rows("ALTER SYSTEM RESET ALL")
            client.rows("SELECT pg_reload_conf()")


def shown(box: Sandbox) -> dict[str, str]:
    with connect(box.conninfo()) as client:  # a new session: it reads the reloaded files
        return {name: str(client.rows(f"SHOW {name}")[0][0]) for name in RELOADABLE}


def test_alter_system_script_runs_in_psql_and_sets_every_value(
    box: Sandbox, admin: Client, binaries: Binaries, tmp_path: Path
) -> None:
    files = render_files(CONFIG, generated_by="pgdyno tune test")
    write_files(tmp_path, files)
    done = subprocess.run(
        [binaries.tool("psql"), "-X", "-v", "ON_ERROR_STOP=1", "-d", box.conninfo(), "-f",
         tmp_path / ALTER_SQL],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    auto = admin.rows(
        "SELECT name, setting, error FROM pg_file_settings WHERE sourcefile LIKE %(file)s",
        {"file": "%/postgresql.auto.conf"},
    )
    assert {name: (setting, error) for name, setting, error in auto} == EXPECTED
    assert wait_for(lambda: shown(box) == RELOADABLE, timeout=30), shown(box)


def test_include_file_parses_and_holds_every_value(box: Sandbox, admin: Client) -> None:
    write_files(box.data_dir, {PG_CONF: render_files(CONFIG, generated_by="t")[PG_CONF]})
    with (box.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(f"include_if_exists = '{PG_CONF}'\n")
    rows = admin.rows(
        "SELECT name, setting, error FROM pg_file_settings WHERE sourcefile LIKE %(file)s",
        {"file": f"%/{PG_CONF}"},
    )
    assert {name: (setting, error) for name, setting, error in rows} == EXPECTED
