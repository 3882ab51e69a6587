"""`pgdyno doctor`: gather the facts (this host, one over SSH, a server, the sandbox, or a saved
snapshot), audit them against the rule base, and cite what the server last waited on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.doctor.evaluate import Audit, audit
from pgdyno.doctor.gather import ServerHost, take_snapshot
from pgdyno.doctor.rules import load_rules
from pgdyno.doctor.snapshot import load_snapshot, save_snapshot
from pgdyno.doctor.waits import WaitCitation, cite
from pgdyno.environment import Environment
from pgdyno.errors import NoResultsYet, UsageError
from pgdyno.experiment.target import locked_sandbox, sandbox_binaries, server_address
from pgdyno.records.waits import WaitProfile
from pgdyno.remote.host import remote_host
from pgdyno.results.open import open_results


@dataclass(frozen=True)
class DoctorRequest:
    """What `doctor` audits: at most one of a server (`dsn`), the sandbox, a saved snapshot."""

    dsn: str | None = None
    sandbox: bool = False
    data_dir: Path | None = None  # when the server cannot say (no privilege) or none is audited
    wal_dir: Path | None = None
    snapshot_path: Path | None = None  # also save the facts gathered here
    from_path: Path | None = None  # audit this saved snapshot instead of this machine
    ssh: str | None = None  # the server's host is this one, reached over SSH
    pg_bin: Path | None = None  # the sandbox's binaries
    pg_version: int | None = None

    def check(self) -> DoctorRequest:
        """One sentence for options that contradict each other; the request itself when not."""
        if sum([self.dsn is not None, self.sandbox, self.from_path is not None]) > 1:
            raise UsageError("give at most one of --dsn, --sandbox and --from.")
        if self.ssh is not None and (self.sandbox or self.from_path is not None):
            raise UsageError("--ssh audits another host and its server (--dsn as that host "
                             "sees it); it cannot be used with --sandbox or --from.")  # fmt: skip
        if self.from_path is not None and self.snapshot_path is not None:
            raise UsageError(
                "--snapshot saves what this machine shows; it cannot be used with --from."
            )
        return self


@dataclass(frozen=True)
class Examined:
    """The audit, the facts it judged, and what the server's newest benchmark waited on (its
    run id and the rules each event speaks to) when the results store holds one."""

    audit: Audit
    snapshot: Mapping[str, Any]
    waits: tuple[int, list[WaitCitation]] | None


@dataclass(frozen=True)
class Audited:
    label: str  # for the report's headline: never a password
    dsn: str | None = None  # the server, reached from here
    password: str | None = None
    server_host: ServerHost | None = None  # the server's host when it is another machine


def examine(env: Environment, request: DoctorRequest, log: Callable[[str], None]) -> Examined:
    """Gather (or load) the facts, audit them, and cite the newest measured waits."""
    request.check()
    rules = load_rules()
    if request.from_path is not None:
        snapshot = load_snapshot(request.from_path)
    else:
        snapshot = _gathered(env, request, log)
        if request.snapshot_path is not None:
            save_snapshot(request.snapshot_path, snapshot)
            log(f"snapshot saved to {request.snapshot_path}")
    result = audit(rules, snapshot)
    measured = None if request.from_path is not None else _measured_waits(env, snapshot)
    fired = {f.rule.id for f in result.findings}
    waits = (measured[0], cite(measured[1], fired)) if measured else None
    return Examined(result, snapshot, waits)


def _gathered(
    env: Environment, request: DoctorRequest, log: Callable[[str], None]
) -> dict[str, Any]:
    with ExitStack() as stack:
        if request.sandbox:
            binaries = sandbox_binaries(env, request.pg_bin, request.pg_version, log)
            box = stack.enter_context(locked_sandbox(env, binaries, {}, log))
            audited = Audited(box.label, box.dsn)
        else:
            audited = _audited(stack, env, request, log)
        return take_snapshot(
            env, target=audited.label, dsn=audited.dsn, password=audited.password,
            data_dir=request.data_dir, wal_dir=request.wal_dir,
            server_host=audited.server_host,
        )  # fmt: skip


def _audited(
    stack: ExitStack, env: Environment, request: DoctorRequest, log: Callable[[str], None]
) -> Audited:
    """What `doctor` audits besides the rules: this host or one over SSH, and the server."""
    address = None if request.dsn is None else server_address(request.dsn)
    if request.ssh is None:
        if address is None:
            return Audited("this host")
        return Audited(address.label, address.dsn, address.password)
    remote = stack.enter_context(remote_host(request.ssh, env.runs_dir, log))
    there = ServerHost(remote.proc_root, remote.sys_root, remote.realpath)
    if address is None:
        return Audited(remote.name, server_host=there)
    return Audited(f"{remote.name} {address.label}", remote.tunnel(address.dsn),
                   address.password, there)  # fmt: skip


def _measured_waits(
    env: Environment, snapshot: Mapping[str, Any]
) -> tuple[int, WaitProfile] | None:
    """The newest wait profile of the audited server in the results store, if there is one
    (read only: a missing store is no results, not an error)."""
    target = snapshot.get("target")
    if not isinstance(target, str) or (
        env.results.conninfo is None
        and not (env.results.path is not None and env.results.path.exists())
    ):
        return None
    try:
        store = open_results(env.results, writing=False)
    except NoResultsYet:
        return None
    with store:
        return store.latest_waits(target)
