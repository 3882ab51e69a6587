"""Where pgbench runs: on this host (`LocalDriver`) or on a remote one beside the server
(remote/driver.py). The bench runner only builds command lines and runs them through one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pgdyno.pgbench import execute
from pgdyno.pgbench.command import RunOptions, run_argv
from pgdyno.pgbench.execute import PgbenchResult


class Driver(Protocol):
    @property
    def host(self) -> str:
        """ "local", or the remote host pgbench runs on."""
        ...

    @property
    def log_clock_shift_s(self) -> int:
        """Seconds to add to the epoch seconds of pgbench's transaction log to bring them onto
        this host's clock (0 here; minus the rounded clock offset on a remote host)."""
        ...

    def argv(
        self, dsn: str, opts: RunOptions, log_prefix: Path | None, *, sampling_rate: float = 1.0,
        scale: int | None = None,
    ) -> list[str]: ...  # fmt: skip

    def execute(
        self, argv: list[str], *, run_dir: Path, duration_s: float, env: Mapping[str, str],
        on_tick: Callable[[float], None], on_spawn: Callable[[int], None] | None = None,
    ) -> PgbenchResult: ...  # fmt: skip


@dataclass(frozen=True)
class LocalDriver:
    pgbench: Path
    host: str = "local"
    log_clock_shift_s: int = 0

    def argv(
        self, dsn: str, opts: RunOptions, log_prefix: Path | None, *, sampling_rate: float = 1.0,
        scale: int | None = None,
    ) -> list[str]:  # fmt: skip
        return run_argv(self.pgbench, dsn, opts, log_prefix, sampling_rate=sampling_rate,
                        scale=scale)  # fmt: skip

    def execute(
        self, argv: list[str], *, run_dir: Path, duration_s: float, env: Mapping[str, str],
        on_tick: Callable[[float], None], on_spawn: Callable[[int], None] | None = None,
    ) -> PgbenchResult:  # fmt: skip
        return execute.execute(argv, run_dir=run_dir, duration_s=duration_s, env=env,
                               on_tick=on_tick, on_spawn=on_spawn)  # fmt: skip
