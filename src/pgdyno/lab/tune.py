"""`pgdyno tune` without --verify: gather the facts (a server, a snapshot file or the options),
compute a configuration, write it as files, apply it. `--verify`'s measurement of the result is
lab's verification (lab/verify.py), which takes `Tuned.ours` and `Tuned.pgtune`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from pgdyno import __version__
from pgdyno.doctor.snapshot import load_snapshot
from pgdyno.environment import Environment
from pgdyno.errors import UsageError
from pgdyno.experiment.target import sandbox_binaries, sandbox_session, server_address
from pgdyno.postgres.binaries import Binaries
from pgdyno.tune.apply import apply_configuration
from pgdyno.tune.facts import Given
from pgdyno.tune.files import render_files
from pgdyno.tune.model import GROUPS, ApplyReport, Configuration, Group, Layer
from pgdyno.tune.out_dir import write_files
from pgdyno.tune.request_checks import check_connections
from pgdyno.tune.session import (
    TuneTarget,
    baseline,
    from_snapshot,
    gather,
    pgdyno_configuration,
)
from pgdyno.undo.handles import ServerHandle, sandbox_handle, server_handle


@dataclass(frozen=True)
class ServerOptions:
    """How to reach and restart the server tuned online (`--dsn` or `--sandbox`)."""

    dsn: str | None
    sandbox: bool
    restart_command: str | None
    data_dir: Path | None
    pg_bin: Path | None
    pg_version: int | None


@dataclass(frozen=True)
class TuneRequest:
    given: Given
    server: ServerOptions
    from_path: Path | None  # a doctor snapshot to tune from, offline
    baseline_name: str | None
    out_dir: Path | None
    apply: bool
    layers: tuple[Layer, ...]
    yes: bool
    verify: bool  # measure the configuration afterwards (`--verify`)
    as_json: bool
    observability: bool = True  # False: --no-observability

    @property
    def groups(self) -> tuple[Group, ...]:
        """The groups of settings to compute: without observability on --no-observability."""
        return GROUPS if self.observability else ("performance",)

    @property
    def online(self) -> bool:
        """A server is connected to (the sandbox unless --dsn)."""
        return not self.given.offline and self.from_path is None

    @property
    def baseline_json_only(self) -> bool:
        """`--baseline NAME --json` alone: the baseline's values as the tool writes them."""
        return bool(
            self.baseline_name and not self.verify and self.as_json
            and not self.out_dir and not self.apply
        )  # fmt: skip

    def check(self) -> TuneRequest:
        """One sentence for options that contradict each other; the request itself when not."""
        server, offline = self.server, self.given.offline
        if offline and (server.dsn is not None or server.sandbox):
            raise UsageError("--ram tunes offline: leave out --dsn and --sandbox, or --ram.")
        if server.dsn is not None and server.sandbox:
            raise UsageError("give --dsn or --sandbox, not both.")
        if self.verify and (self.apply or server.dsn is not None):
            raise UsageError("--verify runs on the sandbox, without --apply or --dsn.")
        if self.from_path is not None:
            self._check_from()
        return self

    def _check_from(self) -> None:
        if self.given.offline or self.server.dsn is not None or self.server.sandbox:
            raise UsageError("--from tunes from a snapshot file: leave out --ram, --dsn and "
                             "--sandbox, or --from.")  # fmt: skip
        if self.apply:
            raise UsageError("--from changes nothing: run `pgdyno tune --apply` on the server's "
                             "host with --dsn or --sandbox instead.")  # fmt: skip
        if self.verify:
            raise UsageError("--verify measures the sandbox: leave out --from.")


@dataclass(frozen=True)
class Tuned:
    """What `tune` computed and did."""

    label: str  # what was tuned, for the output
    config: Configuration  # shown, written and applied: pgdyno's, or --baseline's
    ours: Configuration  # pgdyno's own
    baseline_values: dict[str, str | int | float] | None  # --baseline's, as that tool writes them
    written: tuple[Path, ...]  # --out's files
    applied: ApplyReport | None  # --apply's outcome
    pgtune: Configuration | None  # with --verify: pgtune's, to measure against ours


def tune(env: Environment, request: TuneRequest, log: Callable[[str], None]) -> Tuned:
    """Gather, compute, then write (--out) and apply (--apply) the configuration."""
    with ExitStack() as stack:
        handle: ServerHandle | None = None
        binaries: Binaries | None = None
        if request.online:
            target, handle, binaries = _connect(env, request, stack, log)
            gathered = gather(env, request.given, target)
        elif request.from_path is not None:
            gathered = from_snapshot(load_snapshot(request.from_path), request.given)
        else:
            gathered = gather(env, request.given, None)
        ours = pgdyno_configuration(gathered, env.cache_dir, binaries, request.groups)
        check_connections(request.given.connections, _workers(ours), ours.facts.pg)
        values, config = None, ours
        if request.baseline_name and not request.verify:
            values, config = baseline(gathered, request.baseline_name)
        if request.baseline_json_only:
            return Tuned(gathered.label, config, ours, values, (), None, None)
        written = _write_files(request.out_dir, config, log)
        applied = _apply(env, request, config, handle, log) if request.apply else None
        pgtune = baseline(gathered, "pgtune")[1] if request.verify else None
        return Tuned(gathered.label, config, ours, values, written, applied, pgtune)


def _workers(config: Configuration) -> dict[str, int]:
    values = config.pg_values()
    names = ("autovacuum_max_workers", "max_worker_processes")
    return {name: int(values[name]) for name in names if values.get(name, "").isdigit()}


def _connect(
    env: Environment, request: TuneRequest, stack: ExitStack, log: Callable[[str], None]
) -> tuple[TuneTarget, ServerHandle, Binaries | None]:
    """The server to tune, its handle, and its binaries when they are the sandbox's."""
    server, consent = request.server, request.yes
    if server.dsn is not None:
        address = server_address(server.dsn)
        handle = server_handle(
            address.dsn, address.password, address.label,
            restart_command=server.restart_command, consent=consent, data_dir=server.data_dir,
            env=env,
        )  # fmt: skip
        return TuneTarget(address.label, address.dsn, address.password), handle, None
    binaries = sandbox_binaries(env, server.pg_bin, server.pg_version, log)
    box = stack.enter_context(sandbox_session(env, binaries, log))
    handle = sandbox_handle(box, consent=consent, owner_pid=box.state().owner_pid)
    return TuneTarget(handle.label, handle.dsn, None), handle, binaries


def _write_files(
    out_dir: Path | None, config: Configuration, log: Callable[[str], None]
) -> tuple[Path, ...]:
    if out_dir is None:
        return ()
    files = render_files(config, generated_by=f"pgdyno tune {__version__}")
    written = write_files(out_dir, files)
    log(f"wrote {len(written)} file(s) to {out_dir}: " + ", ".join(p.name for p in written))
    return tuple(written)


def _apply(
    env: Environment,
    request: TuneRequest,
    config: Configuration,
    handle: ServerHandle | None,
    log: Callable[[str], None],
) -> ApplyReport:
    if handle is None:
        raise UsageError("--apply needs a server: give --sandbox or --dsn (not --ram).")
    touches_host = config.facts.local and any(
        s.layer != "postgresql" for s in config.to_apply(request.layers)
    )
    if touches_host and not request.yes:
        raise UsageError(
            "--apply changes host settings too: add --yes to consent (or --layers postgresql)."
        )
    return apply_configuration(env, config, handle, layers=request.layers, log=log)
