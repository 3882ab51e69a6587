"""Where runs go: the sandbox cluster pgdyno manages, or an existing server."""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pgdyno.environment import Environment, ensure_writable, workdir_errors
from pgdyno.errors import BinariesError, ClusterError, PgdynoError, UsageError
from pgdyno.postgres.binaries import Binaries, inspect_bin_dir, resolve, system_installations
from pgdyno.postgres.client import describe, split_password
from pgdyno.postgres.cluster import Sandbox, all_sandboxes, cluster_name, recover, taken_ports
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.postgres.settings import check_setting
from pgdyno.postgres.settings_catalog import describe_settings
from pgdyno.remote.host import RemoteHost


@dataclass(frozen=True)
class Target:
    label: str  # for tables and the results database; never holds a password
    dsn: str  # maintenance connection (no password)
    password: str | None
    binaries: Binaries  # pgbench comes from here
    data_path: Path | None  # where the server keeps its data, when it is on this host
    server_log: Path | None = None  # the sandbox's log file (checkpoint events)

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """Environment for pgbench: the password travels here, never on the command line."""
        env = dict(base)
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        return env


def sandbox_as_target(box: Sandbox) -> Target:
    """A sandbox cluster as the target of runs: its socket, binaries, data and log."""
    return Target(
        label=f"sandbox {box.root.name}",
        dsn=box.conninfo(),
        password=None,
        binaries=box.binaries(),
        data_path=box.data_dir,
        server_log=box.log_file,
    )


LOCK_FILE = "pgdyno.lock"
# The kernel's table of the live flocks: the work directory's lock is a lock of this machine
# whatever host the command reads, so this is never under a recorded /proc root.
LIVE_LOCKS = Path("/proc/locks")
PID_WAIT_S = 2.0  # how long to retry when the holder is gone before it could be named


@contextmanager
def workdir_lock(env: Environment) -> Iterator[None]:
    """One pgdyno command at a time may drive the sandboxes of a work directory.

    The flock on `pgdyno.lock` is held for the command's life and dies with its process; the
    file holds the holder's pid, for the message another command gives. Any OSError on the work
    directory inside the block becomes one sentence naming it.
    """
    with workdir_errors(env.data_dir):
        env.data_dir.mkdir(parents=True, exist_ok=True)
        with (env.data_dir / LOCK_FILE).open("a+") as handle:
            _acquire(handle, env.data_dir)
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()


def _acquire(handle: TextIO, data_dir: Path) -> None:
    """Lock, or say who holds the lock (from the kernel's lock table, else from the file)."""
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            # The kernel's table first: the file may still name a holder killed earlier.
            holder = _flock_holder(handle) or _pid_in(handle)
            if holder is not None or time.monotonic() > deadline:
                who = f"pid {holder}" if holder else "a process whose pid is unknown"
                raise ClusterError(
                    f"another pgdyno command ({who}) is using {data_dir}: wait for it to "
                    "finish or use another --workdir."
                ) from None
            time.sleep(0.02)  # the holder is just letting go: try again
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()


def _pid_in(handle: TextIO) -> int | None:
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() else None


def _flock_holder(handle: TextIO) -> int | None:
    """The pid holding an flock on this file, from the kernel's lock table (Linux)."""
    st = os.fstat(handle.fileno())
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = LIVE_LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 6276 fe:00:9980840 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            # 0 when the holder lives in another pid namespace: not a pid to show
            return int(fields[4]) if fields[4].isdigit() and int(fields[4]) > 0 else None
    return None


def check_settings_for(binaries: Binaries, settings: Mapping[str, str]) -> None:
    """`--set` values checked against these binaries' settings before any server (re)starts.

    What only the server can tell (an extension's setting, a value that fits the type but not
    this machine) is still caught at start, from the server log (Sandbox.start).
    """
    if not settings:
        return
    meta = describe_settings(binaries)  # reads the binaries; starts nothing
    for name, value in settings.items():
        check_setting(meta, name, value, binaries.version, source="--set")


def sandbox_binaries(
    env: Environment, pg_bin: Path | None, pg_version: int | None, log: Callable[[str], None]
) -> Binaries:
    """The binaries of a command on the sandbox: those asked for; else the version of the
    sandbox this work directory has (the one used last when there are several), so that a
    `doctor` or `tune` after `make demo` or a bench looks at the server the user has been
    working with, not a new empty one; else the bundled default. Says which and why when
    there was a choice."""
    if pg_bin is not None or pg_version is not None:
        return resolve(pg_bin, pg_version, env.cache_dir)
    # a version's sandbox, not the twin servers of comparisons (pg18-<set>: twin_sets.py)
    boxes = [b for b in all_sandboxes(env.clusters_dir, None)
             if b.exists() and re.fullmatch(r"pg\d+", b.root.name)]  # fmt: skip
    if not boxes:
        return _default_binaries(env, log)
    box = max(boxes, key=lambda b: b.state_file.stat().st_mtime)
    state = box.state()
    try:
        binaries = inspect_bin_dir(Path(state.bin_dir), f"sandbox {state.name}")
    except BinariesError:  # its binaries moved away (a cache cleared): the same major again
        binaries = resolve(None, box.binaries().major, env.cache_dir)
    others = ", ".join(b.root.name for b in boxes if b is not box)
    why = f" (the one used last; also here: {others})" if others else ""
    log(f"using PostgreSQL {binaries.version}: this work directory's sandbox {state.name}"
        f"{why}; --pg-version N picks another")  # fmt: skip
    return binaries


def _default_binaries(env: Environment, log: Callable[[str], None]) -> Binaries:
    """The bundled default, said with the other versions installed here when there are any."""
    binaries = resolve(None, None, env.cache_dir)
    others = [b for b in system_installations() if b.bin_dir != binaries.bin_dir]
    if others and binaries.source.startswith("bundled"):
        found = ", ".join(f"{b.version} in {b.bin_dir}" for b in others)
        log(f"using PostgreSQL {binaries.version}, the bundled default (also installed here: "
            f"{found}; --pg-version N or --pg-bin DIR picks another)")  # fmt: skip
    return binaries


def open_sandbox(env: Environment, binaries: Binaries, log: Callable[[str], None]) -> Sandbox:
    """The sandbox for these binaries' major version, created when missing; leftovers recovered."""
    run_as = sandbox_user(env.is_root)
    for note in recover(env.clusters_dir, run_as):
        log(note)
    box = Sandbox(env.clusters_dir / cluster_name(binaries.major), run_as)
    if not box.exists():
        log(f"creating sandbox {box.root.name} (PostgreSQL {binaries.version}) in {box.root}")
        box.init(binaries, taken_ports(env.clusters_dir))
    return box


def existing_sandbox(env: Environment, name: str, log: Callable[[str], None]) -> Sandbox | None:
    """The sandbox cluster `name` of the work directory (leftovers recovered), or None when it
    does not exist (destroyed)."""
    run_as = sandbox_user(env.is_root)
    for note in recover(env.clusters_dir, run_as):
        log(note)
    root = env.clusters_dir / name
    if not name or os.sep in name or name in (".", "..") or not root.is_dir():
        return None
    box = Sandbox(root, run_as)
    return box if box.exists() else None


@contextmanager
def running(
    env: Environment,
    box: Sandbox,
    settings: Mapping[str, str] = {},
    *,
    binaries: Binaries | None = None,
    down_ok: bool = False,
) -> Iterator[Sandbox]:
    """`box` running for the block with this command as its owner (started here if it was
    stopped, and stopped again after). `down_ok`: a start that fails leaves it down and the
    block still runs (a rollback mends a sandbox that cannot start)."""
    started_here = False
    if box.postmaster_pid() is None:
        try:
            box.start(
                settings, owner_pid=os.getpid(), binaries=binaries,
                taken_ports=taken_ports(env.clusters_dir),
            )  # fmt: skip
        except PgdynoError:
            if not down_ok:
                raise
        started_here = True
    elif settings:
        raise ClusterError(
            f"sandbox {box.root.name} is already running, so --set cannot apply: stop it with "
            "`pgdyno sandbox stop` first."
        )
    try:
        yield box
    finally:
        if started_here:
            box.stop()


@contextmanager
def sandbox_session(
    env: Environment, binaries: Binaries, log: Callable[[str], None]
) -> Iterator[Sandbox]:
    """The one way a command holds the sandbox of a version: the work directory locked, the
    cluster created when missing and leftovers recovered, running for the block."""
    with workdir_lock(env):
        box = open_sandbox(env, binaries, log)
        with running(env, box, binaries=binaries) as running_box:
            yield running_box


@contextmanager
def sandbox_target(
    env: Environment,
    binaries: Binaries,
    settings: Mapping[str, str],
    log: Callable[[str], None],
) -> Iterator[Target]:
    """A running sandbox for the duration of the block; stopped again if this started it."""
    check_settings_for(binaries, settings)
    box = open_sandbox(env, binaries, log)
    with running(env, box, settings, binaries=binaries):
        yield sandbox_as_target(box)


@contextmanager
def locked_sandbox(
    env: Environment,
    binaries: Binaries,
    settings: Mapping[str, str],
    log: Callable[[str], None],
) -> Iterator[Target]:
    """`sandbox_target` with the work directory locked for the block (see `workdir_lock`)."""
    with workdir_lock(env), sandbox_target(env, binaries, settings, log) as target:
        yield target


@dataclass(frozen=True)
class ServerAddress:
    """An existing server's connection string split into what may be shown and the password."""

    dsn: str  # no password
    password: str | None
    label: str  # "server host=db1 ..." for tables and the results database


def server_address(dsn: str) -> ServerAddress:
    """Split the password (if any) off `dsn`, so it is kept out of labels and records."""
    clean, password = split_password(dsn)
    return ServerAddress(clean, password, f"server {describe(clean)}")


def server_target(dsn: str, binaries: Binaries) -> Target:
    """An existing server; its password (if any) is split off and kept out of records."""
    address = server_address(dsn)
    return Target(address.label, address.dsn, address.password, binaries, None)


def remote_server_target(remote: RemoteHost, dsn: str, binaries: Binaries) -> Target:
    """The server `dsn` names as the remote host sees it, reached here through a port
    forwarded over the SSH connection; its password (if any) is split off as for any server."""
    address = server_address(dsn)
    return Target(f"{remote.name} {address.label}", remote.tunnel(address.dsn),
                  address.password, binaries, None)  # fmt: skip


def check_target_settings(dsn: str | None, settings: Mapping[str, str]) -> None:
    """`--set` changes the sandbox pgdyno starts, never an existing server."""
    if dsn is not None and settings:
        raise UsageError("--set applies to the sandbox only; change an existing server yourself.")


@contextmanager
def bench_target(
    env: Environment,
    dsn: str | None,
    binaries: Binaries,
    settings: Mapping[str, str],
    log: Callable[[str], None],
) -> Iterator[Target]:
    """Where runs go: the sandbox (locked, started for the block if it was not running) when
    `dsn` is None, else the server `dsn` names. Either way an unusable work directory is one
    sentence before any run."""
    check_target_settings(dsn, settings)
    if dsn is None:
        with locked_sandbox(env, binaries, settings, log) as target:  # the lock proves the dir
            yield target
        return
    target = server_target(dsn, binaries)  # a bad DSN is named before the work directory
    ensure_writable(env.data_dir, env.runs_dir)
    yield target
