"""`pgdyno tune`'s options parsed: --layers, and --verify's measurement checked before a
sandbox is started or a plan written (the request itself: pgdyno.lab.tune.TuneRequest)."""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.errors import UsageError
from pgdyno.experiment.matrix import parse_workloads
from pgdyno.experiment.rounds import parse_budget
from pgdyno.pgbench.command import one_dataset
from pgdyno.pgbench.scale import parse_scale_spec
from pgdyno.tune.model import LAYERS, Layer


@dataclass(frozen=True)
class VerifyOptions:
    """`--verify`'s measurement: the pgbench matrix and the adaptive rounds."""

    workloads: tuple[str, ...]
    scale: str
    clients: int | None
    duration: int
    warmup: int
    precision: float | None
    budget: str | None
    ladder: bool


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
