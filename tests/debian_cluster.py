"""Debian's packaged PostgreSQL as a user has it: the "existing server" of the tests.

`debian_cluster()` makes a cluster of its own with `pg_createcluster` (Debian's defaults: peer
authentication on the Unix socket, scram-sha-256 over TCP, SSL on with the snakeoil key that
only the `ssl-cert` group can read), adds the roles the tests connect as, and drops it
afterwards. The package's default cluster (e.g. 15/main) is never touched.

It needs root and Debian's `postgresql` package (`scripts/bootstrap dev` installs it); without
them it skips the test with the reason.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pytest

from host_conditions import huge_page_pool
from parallel import creating_clusters
from pgdyno.process import pid_alive

ADMIN_ROLE = "pgdyno_admin"
# The password of ADMIN_ROLE, for the tests that connect over TCP (scram-sha-256 there).
ADMIN_PASSWORD = "pgdyno-admin-pw"
SOCKET_DIR = Path("/var/run/postgresql")
LIB_DIR = Path("/usr/lib/postgresql")
FIRST_PORT = 5500
NAME_PREFIX = "pgdyno_t"
TIMEOUT_S = 120
WAIT_SAMPLING = (
    "pg_wait_sampling"  # the extension, and its package postgresql-<major>-pg-wait-sampling
)


@dataclass(frozen=True)
class DebianCluster:
    """One cluster made by pg_createcluster, as `pg_lsclusters` lists it."""

    version: int
    name: str
    port: int
    data_dir: Path
    conf_dir: Path
    log_file: Path
    socket_dir: Path = SOCKET_DIR
    # `SHOW ssl` once created: on, as Debian sets it up with the snakeoil certificate.
    ssl: bool = False

    ADMIN_ROLE: ClassVar[str] = ADMIN_ROLE
    ADMIN_PASSWORD: ClassVar[str] = ADMIN_PASSWORD

    @property
    def bin_dir(self) -> Path:
        return LIB_DIR / str(self.version) / "bin"

    def peer_dsn(self, user: str = "postgres") -> str:
        """On the Unix socket, where Debian's pg_hba.conf says `peer`: the OS user must be
        `user` (the tests, as root, connect as the role `root`).

        >>> example().peer_dsn("root")
        'host=/var/run/postgresql port=5500 user=root dbname=postgres'
        """
        return f"host={self.socket_dir} port={self.port} user={user} dbname=postgres"

    def password_dsn(self) -> str:
        """Over TCP on 127.0.0.1 (scram-sha-256), as ADMIN_ROLE; the password is not in it.

        >>> example().password_dsn()
        'host=127.0.0.1 port=5500 user=pgdyno_admin dbname=postgres'
        """
        return f"host=127.0.0.1 port={self.port} user={ADMIN_ROLE} dbname=postgres"

    def psql(self, sql: str) -> str:
        """Run `sql` with psql as the OS user postgres (peer, on the socket); its output."""
        argv = [str(self.bin_dir / "psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1",
                "-h", str(self.socket_dir), "-p", str(self.port), "-d", "postgres",
                "-c", sql]  # fmt: skip
        return checked(run_as_postgres(argv)).stdout

    def is_running(self) -> bool:
        """`pg_ctlcluster V NAME status`: 0 running, 3 stopped, 4 no accessible data directory."""
        return run_root(["pg_ctlcluster", str(self.version), self.name, "status"]).returncode == 0

    def start(self) -> None:
        """As Debian starts it: pg_ctlcluster (root) runs the server as postgres with all its
        groups, ssl-cert included."""
        checked(run_root(["pg_ctlcluster", str(self.version), self.name, "start"]))

    def stop(self) -> None:
        checked(run_root(["pg_ctlcluster", str(self.version), self.name, "stop", "-m", "fast"]))

    def conninfo(self) -> str:
        """As the sandbox's: how root reaches it (peer authentication on the socket)."""
        return self.peer_dsn("root")

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid_alive(pid) else None

    def auto_conf(self) -> str:
        """The text of postgresql.auto.conf (ALTER SYSTEM's file) in the data directory."""
        return (self.data_dir / "postgresql.auto.conf").read_text()


def example() -> DebianCluster:
    """A cluster description for the doctests (nothing is created)."""
    return DebianCluster(
        version=15,
        name="pgdyno_t1",
        port=FIRST_PORT,
        data_dir=Path("/var/lib/postgresql/15/pgdyno_t1"),
        conf_dir=Path("/etc/postgresql/15/pgdyno_t1"),
        log_file=Path("/var/log/postgresql/postgresql-15-pgdyno_t1.log"),
    )


# -- running commands -------------------------------------------------------------------------


def run_root(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def run_as_postgres(
    argv: Sequence[str], *, supplementary_groups: bool = True
) -> subprocess.CompletedProcess[str]:
    """`argv` as the OS user postgres, with its supplementary groups (as `su postgres` gives
    them: ssl-cert among them) or, with supplementary_groups=False, with none."""
    owner = pwd.getpwnam("postgres")
    groups = os.getgrouplist("postgres", owner.pw_gid) if supplementary_groups else []
    env = {"PATH": "/usr/bin:/bin", "HOME": owner.pw_dir, "LANG": os.environ.get("LANG", "C")}
    return subprocess.run(
        list(argv),
        user=owner.pw_uid,
        group=owner.pw_gid,
        extra_groups=groups,
        cwd="/",
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def checked(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        command = " ".join(result.args)
        raise RuntimeError(
            f"`{command}` failed with status {result.returncode}: {result.stderr.strip()}"
        )
    return result


# -- making and dropping a cluster -------------------------------------------------------------


def unavailable() -> str | None:
    """Why no Debian cluster can be made here, or None."""
    if shutil.which("pg_createcluster") is None or newest_major() is None:
        return (
            "needs Debian's postgresql package (pg_createcluster): "
            "run `scripts/bootstrap dev` as root"
        )
    if os.geteuid() != 0:
        return "needs root to create a Debian PostgreSQL cluster (pg_createcluster)"
    return None


def wait_sampling_missing() -> str | None:
    """Why no Debian cluster loading pg_wait_sampling can be made here, or None."""
    reason = unavailable()
    if reason is not None:
        return reason
    major = newest_major()
    library = LIB_DIR / str(major) / "lib" / f"{WAIT_SAMPLING}.so"
    control = Path("/usr/share/postgresql") / str(major) / "extension" / f"{WAIT_SAMPLING}.control"
    if not (library.is_file() and control.is_file()):
        return (
            f"needs Debian's postgresql-{major}-pg-wait-sampling ({library} not found): "
            "run `scripts/bootstrap dev` as root"
        )
    return None


def newest_major() -> int | None:
    """The newest PostgreSQL major installed under /usr/lib/postgresql with a server."""
    if not LIB_DIR.is_dir():
        return None
    majors = [
        int(path.name)
        for path in LIB_DIR.iterdir()
        if path.name.isdigit() and (path / "bin" / "postgres").is_file()
    ]
    return max(majors, default=None)


def clusters() -> list[dict[str, object]]:
    """`pg_lsclusters --json`: every cluster of every version, as postgresql-common sees it."""
    return list(json.loads(checked(run_root(["pg_lsclusters", "--json"])).stdout or "[]"))


def free_port() -> int:
    """The first port from FIRST_PORT that no cluster is configured for and nothing listens on."""
    taken = {int(str(c["port"])) for c in clusters() if str(c.get("port", "")).isdigit()}
    for port in range(FIRST_PORT, FIRST_PORT + 500):
        if port in taken or (SOCKET_DIR / f".s.PGSQL.{port}").exists():
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free TCP port from {FIRST_PORT} on 127.0.0.1")


def leftovers(name: str) -> list[tuple[int, str]]:
    """(version, name) of the clusters to drop before making `name`: one of that name (a crashed
    run of this process id) and ours whose test process is gone."""
    found = []
    for cluster in clusters():
        cname = str(cluster["cluster"])
        match = re.fullmatch(NAME_PREFIX + r"(\d+)(?:_[a-z]+)?", cname)
        if cname == name or (match and not pid_alive(int(match.group(1)))):
            found.append((int(str(cluster["version"])), cname))
    return found


def postmasters(version: int, name: str, data_dir: Path) -> list[int]:
    """Process ids of the server of this cluster still alive: the postmaster (`-D data_dir`)
    and its children (`postgres: V/NAME: ...`, Debian's cluster_name)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [arg.decode(errors="replace") for arg in args]
        if str(data_dir) in words or words[0].startswith(f"postgres: {version}/{name}: "):
            pids.append(int(entry.name))
    return pids


def drop(version: int, name: str) -> None:
    """pg_dropcluster --stop, then make sure no process of the cluster and none of its
    directories is left."""
    data_dir = Path("/var/lib/postgresql") / str(version) / name
    conf_dir = Path("/etc/postgresql") / str(version) / name
    run_root(["pg_dropcluster", "--stop", str(version), name])
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = postmasters(version, name, data_dir)
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if pid_alive(pid)]
            time.sleep(0.1)
    if conf_dir.exists() or data_dir.exists():
        # Its server was running and would not stop: now that it is gone, drop for real.
        run_root(["pg_dropcluster", str(version), name])
        shutil.rmtree(conf_dir, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)


def describe(version: int, name: str, port: int, ssl: bool) -> DebianCluster:
    listed = next(
        (c for c in clusters() if c["cluster"] == name and int(str(c["version"])) == version), {}
    )
    return DebianCluster(
        version=version,
        name=name,
        port=port,
        data_dir=Path(str(listed.get("pgdata", f"/var/lib/postgresql/{version}/{name}"))),
        conf_dir=Path(str(listed.get("configdir", f"/etc/postgresql/{version}/{name}"))),
        log_file=Path(
            str(listed.get("logfile", f"/var/log/postgresql/postgresql-{version}-{name}.log"))
        ),
        socket_dir=Path(str(listed.get("socketdir", SOCKET_DIR))),
        ssl=ssl,
    )


@contextmanager
def debian_cluster(
    settings: Mapping[str, str] | None = None, tag: str = ""
) -> Iterator[DebianCluster]:
    """A started cluster of the newest installed major, with Debian's defaults and the roles
    `root` (SUPERUSER: root connects by peer on the socket) and ADMIN_ROLE (SUPERUSER, with
    ADMIN_PASSWORD: over TCP); dropped on the way out, whatever happened.

    `settings` go into its postgresql.conf before the first start (pg_createcluster -o), e.g.
    shared_preload_libraries; `tag` (lower-case letters) names a second cluster of this process
    (`pgdyno_t<pid>_<tag>`) beside the session's."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    version = newest_major()
    assert version is not None
    assert re.fullmatch(r"[a-z]*", tag), tag
    name = f"{NAME_PREFIX}{os.getpid()}" + (f"_{tag}" if tag else "")
    for old in leftovers(name):
        drop(*old)
    # huge_pages off: a cluster of Debian's defaults (try) would take the pages a tune --apply
    # test reserves for its sandbox on another worker (tests/parallel.py); its initdb (before
    # 16) cannot be told so and runs while no test holds reserved pages.
    settings = {"huge_pages": "off", **(settings or {})}
    options = [arg for key, value in settings.items()
               for arg in ("--pgoption", f"{key}={value}")]  # fmt: skip
    try:
        # another worker's cluster must not take the same port
        with huge_page_pool(), creating_clusters():
            port = free_port()
            checked(run_root(["pg_createcluster", str(version), name, "-p", str(port), *options,
                              "--start"]))  # fmt: skip
        cluster = describe(version, name, port, ssl=False)
        cluster.psql("CREATE ROLE root SUPERUSER LOGIN")
        cluster.psql(f"CREATE ROLE {ADMIN_ROLE} SUPERUSER LOGIN PASSWORD '{ADMIN_PASSWORD}'")
        yield replace(cluster, ssl=cluster.psql("SHOW ssl").strip() == "on")
    finally:
        drop(version, name)
