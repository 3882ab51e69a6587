"""Progress of a bench matrix: a Rich bar with ETA on a terminal, one line per run otherwise."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pgdyno.records import RunCell, RunRecord


class MatrixProgress:
    """Time-based: the bar moves with the seconds of warm-up and run, so the ETA is honest."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[runs]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.task: TaskID | None = None
        self.per_run = 1.0
        self.total_runs = 0
        self.done_runs = 0

    def __enter__(self) -> MatrixProgress:
        if self.live:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.bar.stop()

    def planned(self, cells: list[RunCell], seconds_per_run: float) -> None:
        self.per_run = seconds_per_run
        self.total_runs = len(cells)
        self.task = self.bar.add_task(
            "starting", total=seconds_per_run * len(cells), runs=f"0/{len(cells)} runs"
        )
        if not self.live:
            minutes = seconds_per_run * len(cells) / 60
            self.console.print(f"{len(cells)} runs planned, about {minutes:.1f} min")

    def phase(self, text: str) -> None:
        if self.task is not None:
            self.bar.update(self.task, description=text)
        if not self.live and text.startswith("dataset"):
            self.console.print(text)

    def tick(self, cell: RunCell, elapsed_s: float) -> None:
        if self.task is not None:
            done = cell.index * self.per_run + min(elapsed_s, self.per_run)
            self.bar.update(self.task, completed=done)

    def finished(self, cell: RunCell, record: RunRecord, run_id: int) -> None:
        self.done_runs += 1
        if self.task is not None:
            self.bar.update(
                self.task, completed=(cell.index + 1) * self.per_run,
                runs=f"{self.done_runs}/{self.total_runs} runs",
            )  # fmt: skip
        tps = f"{record.summary.tps:,.1f} TPS" if record.summary else record.status
        line = (
            f"run {run_id} ({self.done_runs}/{self.total_runs}): {cell.workload} scale "
            f"{cell.scale}, {cell.clients} clients, repeat {cell.repeat}: {tps}"
        )
        if record.status == "failed":
            line += f" - {record.error}"
        if self.live:
            self.bar.console.print(line)
        else:
            self.console.print(line)
