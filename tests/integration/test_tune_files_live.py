"""The PostgreSQL files of `pgdyno tune --out` on a real server: `alter-system.sql` runs in
psql as its header says and sets every value, the include file parses without an error, and the
files written for edge configurations start the server (with the bounds of --connections
checked against PostgreSQL's own start-up checks).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import wait_for
from pgdyno.errors import UsageError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import run
from pgdyno.records.tune import TuneFacts
from pgdyno.tune.files import ALTER_SQL, PG_CONF, render_files
from pgdyno.tune.huge_pages import PagesFigure, sized
from pgdyno.tune.model import Configuration, Setting
from pgdyno.tune.out_dir import write_files
from pgdyno.tune.request_checks import SUPERUSER_RESERVED, check_connections, most_connections

FACTS = TuneFacts("oltp", connections=300)  # the --out files do not read the facts
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
    FACTS,
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


# -- the files of `pgdyno tune --out` for edge configurations give a server that starts ----------

# PostgreSQL 18 (the sandbox's version): the fewest connections the server takes, a machine
# where work_mem hits its floor (max_connections lowered to what fits), and a large one with
# io_workers, 8 autovacuum workers and their cost limit, headroom in max_worker_processes.
EDGES = {
    "fewest-connections": ["--ram", "1GB", "--cpus", "2", "--storage", "ssd",
                           "--connections", "4", "--profile", "oltp"],
    "work-mem-floor": ["--ram", "2GB", "--cpus", "4", "--storage", "nvme",
                       "--connections", "20000", "--profile", "web"],
    "many-workers": ["--ram", "8GB", "--cpus", "32", "--storage", "san", "--profile", "dw"],
}  # fmt: skip


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_out_files_of_edge_configurations_start_the_server(
    box: Sandbox, run_cli, workdir: Path, tmp_path: Path, edge: str
) -> None:
    out = tmp_path / "tuned"
    made = run_cli(workdir, "tune", "--pg-version", "18", *EDGES[edge], "--out", str(out))
    assert made.code == 0, made.stderr
    written = _conf_values((out / PG_CONF).read_text())
    assert written["max_connections"] and "io_method" not in written
    if edge == "work-mem-floor":
        assert written["work_mem"] == "64kB" and int(written["max_connections"]) < 20000
    if edge == "many-workers":
        assert (written["io_workers"], written["autovacuum_vacuum_cost_limit"]) == ("32", "533")
    box.stop()
    (box.data_dir / PG_CONF).write_text((out / PG_CONF).read_text())
    with (box.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(f"include '{PG_CONF}'\n")
    box.start({}, owner_pid=None)  # a ClusterError, with the server's log, if it does not start
    with connect(box.conninfo()) as client:
        for name, value in written.items():
            shown = str(client.rows(f"SHOW {name}")[0][0])
            # -1: automatic (wal_buffers), shown as what the server computed
            assert shown == value or value == "-1", (name, shown, value)


def _conf_values(text: str) -> dict[str, str]:
    """name -> value of the uncommented `name = value` lines of a postgresql.conf file."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {
        name.strip(): value.split("#")[0].strip().strip("'")
        for name, value in pairs
        if not name.lstrip().startswith("#")
    }


def _postgres_accepts(box: Sandbox, binaries: Binaries, connections: int) -> tuple[bool, str]:
    """Whether PostgreSQL's own start-up checks pass with this max_connections: `postgres -C
    shared_memory_size` runs them (InitializeMaxBackends) on the stopped data directory."""
    done = run(
        [binaries.tool("postgres"), "-D", box.data_dir, "-c", f"max_connections={connections}",
         "-C", "shared_memory_size"],
        what="postgres -C", run_as=box.run_as, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode == 0, done.stderr


def test_connection_bounds_are_the_servers_own(box: Sandbox, binaries: Binaries) -> None:
    """The bounds `tune --connections` holds to (tune/request_checks.py), on the real server."""
    box.stop()
    fewest, most = SUPERUSER_RESERVED + 1, most_connections({}, 18)
    assert _postgres_accepts(box, binaries, fewest)[0]
    refused, why = _postgres_accepts(box, binaries, fewest - 1)
    assert not refused and "superuser_reserved_connections" in why, why
    assert _postgres_accepts(box, binaries, most)[0]
    refused, why = _postgres_accepts(box, binaries, most + 1)
    assert not refused and "too many server processes" in why, why
    with pytest.raises(UsageError):
        check_connections(most + 1, {}, 18)
    with pytest.raises(UsageError):
        check_connections(fewest - 1, {}, 18)


@pytest.mark.parametrize("pages", [None, 100])
def test_out_files_without_reserved_huge_pages_start_the_server(
    box: Sandbox, pages: int | None
) -> None:
    """huge_pages = on over pages nothing reserved yet (counted or not) is written as try,
    which starts whatever the kernel holds (tune/huge_pages.py)."""
    config = Configuration("pgdyno", "oltp", (
        Setting("postgresql", "huge_pages", "on", "why", takes_effect="restart"),
        Setting("host", "vm.nr_hugepages", "100", "why", current="0"),
    ), FACTS)  # fmt: skip
    figure = PagesFigure(pages, "a test", "postgres -D DATADIR -C shared_memory_size_in_huge_pages")
    text = render_files(sized(config, figure), generated_by="pgdyno tune test")[PG_CONF]
    assert _conf_values(text)["huge_pages"] == "try"
    box.stop()
    (box.data_dir / PG_CONF).write_text(text)
    with (box.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(f"include '{PG_CONF}'\n")
    box.start({}, owner_pid=None)
    with connect(box.conninfo()) as client:
        assert client.rows("SHOW huge_pages")[0][0] == "try"
