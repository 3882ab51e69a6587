"""What `pgdyno tune` was asked, as one frozen record checked before anything is read or run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.experiment.matrix import parse_workloads
from pgdyno.experiment.rounds import parse_budget
from pgdyno.pgbench.command import one_dataset
from pgdyno.pgbench.scale import parse_scale_spec
from pgdyno.tune.facts import Given
from pgdyno.tune.model import GROUPS, LAYERS, Group, Layer


@dataclass(frozen=True)
class VerifyOptions:
    """`--verify`'s measurement: the pgbench matrix and the adaptive rounds."""

    workloads: tuple[str, ...]
    scale: str
    clients: int | None
    duration: int
    precision: float | None
    budget: str | None
    ladder: bool


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
    verify: VerifyOptions | None
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

    def check(self) -> TuneRequest:
        """One sentence for options that contradict each other; the request itself when not."""
        server, offline = self.server, self.given.offline
        if offline and (server.dsn is not None or server.sandbox):
            raise UsageError("--ram tunes offline: leave out --dsn and --sandbox, or --ram.")
        if server.dsn is not None and server.sandbox:
            raise UsageError("give --dsn or --sandbox, not both.")
        if self.verify is not None and (self.apply or server.dsn is not None):
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
        if self.verify is not None:
            raise UsageError("--verify measures the sandbox: leave out --from.")


def parse_layers(text: str) -> tuple[Layer, ...]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in LAYERS]
    if unknown or not names:
        raise UsageError(
            f"--layers {text!r}: each layer is one of {', '.join(LAYERS)} (comma-separated)."
        )
    return tuple(name for name in LAYERS if name in names)


def workload_names(text: str) -> tuple[str, ...]:
    """--workload's names as typed (checked by `check_verify`, with the bench's own parser)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def check_verify(options: VerifyOptions) -> None:
    """The --verify options, checked before a sandbox is started or a plan written."""
    one_dataset(parse_workloads(",".join(options.workloads), []))
    for scale in options.scale.split(","):
        parse_scale_spec(scale)
    if options.budget is not None:
        parse_budget(options.budget)
