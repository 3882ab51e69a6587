"""A run's on-CPU profile as terminal tables: `runs show ID --profile` (pure)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table

from pgdyno.records.profile import CpuProfile
from pgdyno.textsafe import safe_text

FUNCTIONS_PER_PROCESS = 10


def _pct(share: float) -> str:
    return f"{100.0 * share:.1f}"


def source_text(found: CpuProfile) -> str:
    """
    >>> source_text(CpuProfile(99.0, 1200, 0.31, (), ()))
    'perf cpu-clock at 99 Hz, 1,200 samples, 31.0% in the kernel'
    """
    return (
        f"perf cpu-clock at {found.sample_hz:g} Hz, {found.samples:,} samples, "
        f"{_pct(found.kernel_share)}% in the kernel"
    )


def profile_tables(run_id: int, found: CpuProfile) -> list[RenderableType]:
    """The server's CPU by process type, then each type's top functions (self time, as % of
    all the server's samples; `k` marks a kernel function)."""
    types = Table(
        title=f"run {run_id} CPU profile: {source_text(found)}", title_justify="left",
    )  # fmt: skip
    for name in ("process", "% of CPU"):
        types.add_column(name, justify="left" if name == "process" else "right")
    for process, share in found.by_process:
        types.add_row(safe_text(process), _pct(share))
    tables: list[RenderableType] = [types]
    for process, _ in found.by_process:
        mine = [f for f in found.top if f.process == process][:FUNCTIONS_PER_PROCESS]
        if not mine:
            continue
        table = Table(
            title=f"{safe_text(process)}: top functions (self)", title_justify="left",
            caption="k: in the kernel",
        )  # fmt: skip
        for name in ("function", "", "% of CPU"):
            table.add_column(name, justify="right" if name == "% of CPU" else "left")
        for f in mine:
            table.add_row(safe_text(f.function), "k" if f.kernel else "", _pct(f.share))
        tables.append(table)
    return tables
