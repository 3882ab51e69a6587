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
from pgdyno.textsafe import safe_text

# Redraws of the bar a second. Rich's default, 10, cost ~12 ms of CPU a second on the machine
# being measured (benchmarks/harness_cost.py); its columns change once a second anyway.
REFRESH_PER_S = 1.0


class MatrixProgress:
    """Time-based: the bar moves with the seconds of warm-up and run, so the ETA is honest.

    Drawn only on a terminal: elsewhere (CI, a pipe, TERM=dumb) there is no refresh thread at
    all, and one line per run instead.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal and not console.is_dumb_terminal
        self.bar = Progress(
            # No markup: descriptions carry set names from plans, shown as written.
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.fields[runs]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            refresh_per_second=REFRESH_PER_S,
        )
        self.task: TaskID | None = None
        self.per_run = 1.0
        self.total_runs = 0
        self.done_runs = 0  # finished in this command or earlier (skipped on --resume)
        self.before = 0  # of those, the runs an earlier command finished
        self.said: set[str] = set()  # the keys of the lines `once` printed

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
            "starting", total=seconds_per_run * len(cells),
            completed=round(self.before * seconds_per_run),
            runs=f"{self.done_runs}/{len(cells)} runs",
        )  # fmt: skip
        if not self.live:
            left = len(cells) - self.before
            minutes = seconds_per_run * left / 60
            done = f" ({self.before} already done)" if self.before else ""
            self.console.print(f"{left} runs planned{done}, about {minutes:.1f} min")

    def skipped(self, count: int) -> None:
        """Runs an earlier command finished (compare --resume): done, not remaining."""
        self.before += count
        self.done_runs += count
        if self.task is not None:
            self.bar.update(
                self.task, completed=self.done_runs * self.per_run,
                runs=f"{self.done_runs}/{self.total_runs} runs",
            )  # fmt: skip

    def phase(self, text: str) -> None:
        if self.task is not None:
            self.bar.update(self.task, description=safe_text(text))

    def once(self, key: str, text: str) -> None:
        """A line said once per `key` in this command (a dataset: generated or reused)."""
        if key in self.said:
            return
        self.said.add(key)
        (self.bar.console if self.live else self.console).print(safe_text(text), markup=False)

    def tick(self, cell: RunCell, elapsed_s: float) -> None:
        if self.task is not None:
            done = (self.before + cell.index) * self.per_run + min(elapsed_s, self.per_run)
            self.bar.update(self.task, completed=done)

    def finished(self, cell: RunCell, record: RunRecord, run_id: int) -> None:
        if self.done_runs >= self.total_runs:
            # Adaptive rounds and `noise` run on as their stopping rule or budget decides:
            # the plan grows with the runs instead of counting past its end.
            self.total_runs = self.done_runs + 1
            if self.task is not None:
                self.bar.update(self.task, total=self.total_runs * self.per_run)
        self.done_runs += 1
        if self.task is not None:
            self.bar.update(
                self.task, completed=(self.before + cell.index + 1) * self.per_run,
                runs=f"{self.done_runs}/{self.total_runs} runs",
            )  # fmt: skip
        tps = f"{record.summary.tps:,.1f} TPS" if record.summary else record.status
        if record.tpcc is not None:  # judged on NOPM: say it first
            tps = f"{record.tpcc.nopm:,.0f} NOPM, {tps}"
        size = f"{cell.scale} warehouses" if record.tpcc is not None else f"scale {cell.scale}"
        where = f"set {record.set_name}, " if record.set_name else ""
        line = (
            f"run {run_id} ({self.done_runs}/{self.total_runs}): {where}{cell.workload} {size}, "
            f"{cell.clients} clients, repeat {cell.repeat}: {tps}"
        )
        if record.status == "failed":
            line += f" - {record.error}"
        if self.live:
            self.bar.console.print(line)
        else:
            self.console.print(line)
