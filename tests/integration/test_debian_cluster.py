"""The Debian cluster the existing-server tests use (`debian_server`): reachable the ways a user
reaches it, and failing to restart the way a server started by plain `pg_ctl` fails, without the
ssl-cert group that lets it read its key."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from debian_cluster import ADMIN_PASSWORD, DebianCluster, run_as_postgres, unavailable
from pgdyno.errors import PgdynoError
from pgdyno.postgres.client import connect

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")


@pytest.fixture
def no_password_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """No password from the environment or a ~/.pgpass: only the one a test passes."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent/pgpass")


def test_root_connects_by_peer_on_the_socket(debian_server: DebianCluster):
    with connect(debian_server.peer_dsn("root")) as client:
        assert client.rows("SELECT 1") == [(1,)]
        assert client.rows("SELECT current_user, rolsuper FROM pg_roles "
                           "WHERE rolname = current_user") == [("root", True)]  # fmt: skip
        assert client.host == str(debian_server.socket_dir)


@pytest.mark.usefixtures("no_password_sources")
def test_the_admin_needs_its_password_over_tcp(debian_server: DebianCluster):
    dsn = debian_server.password_dsn()
    assert "password" not in dsn
    with connect(dsn, ADMIN_PASSWORD) as client:
        assert client.rows("SELECT current_user") == [("pgdyno_admin",)]
        # Debian's default: SSL on, so libpq's sslmode=prefer uses it over TCP.
        assert client.rows("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == [(True,)]
    with pytest.raises(PgdynoError, match="no password supplied"), connect(dsn):
        pass
    with (
        pytest.raises(PgdynoError, match="password authentication failed"),
        connect(dsn, "not-" + ADMIN_PASSWORD),
    ):
        pass


def test_the_ssl_key_is_readable_only_through_the_ssl_cert_group(debian_server: DebianCluster):
    assert debian_server.ssl, "Debian's createcluster.conf sets ssl = on"
    assert debian_server.psql("SHOW ssl").strip() == "on"
    key = Path(debian_server.psql("SHOW ssl_key_file").strip())
    info = key.stat()
    postgres = pwd.getpwnam("postgres")
    ssl_cert = grp.getgrnam("ssl-cert")
    assert grp.getgrgid(info.st_gid).gr_name == "ssl-cert", key
    assert info.st_uid != postgres.pw_uid, f"{key} is not the server owner's own"
    assert info.st_mode & stat.S_IRGRP and not info.st_mode & stat.S_IROTH, oct(info.st_mode)
    # postgres reads it as a member of ssl-cert: a supplementary group, not its primary one.
    assert postgres.pw_gid != ssl_cert.gr_gid
    assert ssl_cert.gr_gid in os.getgrouplist("postgres", postgres.pw_gid)


def test_pg_ctl_without_supplementary_groups_cannot_restart_it(debian_server: DebianCluster):
    """pg_ctl run as postgres with only its primary group (what a process that switches user
    without initgroups gets) restarts the server with the options it was started with, and the
    server dies reading its SSL key; pg_ctlcluster starts it again."""
    logdir = Path(tempfile.mkdtemp(prefix="pgdyno-pgctl-", dir="/tmp"))
    shutil.chown(logdir, "postgres", "postgres")
    log = logdir / "pg_ctl.log"
    pg_ctl = str(debian_server.bin_dir / "pg_ctl")
    try:
        result = run_as_postgres(
            [pg_ctl, "restart", "-D", str(debian_server.data_dir), "-m", "fast", "-w", "-t", "60",
             "-s", "-l", str(log)],
            supplementary_groups=False,
        )  # fmt: skip
        server_log = log.read_text() if log.exists() else ""
        assert result.returncode != 0, (result.stdout, result.stderr, server_log)
        assert not debian_server.is_running()
        assert "private key file" in server_log and "Permission denied" in server_log, server_log
    finally:
        if not debian_server.is_running():
            debian_server.start()
        shutil.rmtree(logdir, ignore_errors=True)
    assert debian_server.is_running()
    with connect(debian_server.peer_dsn("root")) as client:
        assert client.rows("SELECT 1") == [(1,)]
