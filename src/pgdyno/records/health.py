"""How steady a run was and whether pgbench kept up: stats/steady.py judges, the store keeps it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunHealth:
    """The stability figures of one run and the warnings they raise.

    A run assessed by stats/steady.py has every window figure; `RunHealth()` (all None, no
    warnings) is a run that was not assessed (it failed, or was stored without them).
    """

    measured_s: int | None = None  # seconds in the measured window (after the warm-up trim)
    trimmed_s: int | None = None  # seconds dropped at the start
    tps_mean: float | None = None
    tps_cv_pct: float | None = None  # stability: stddev / mean of per-second TPS, in %
    tps_trend_pct: float | None = None  # fitted change from the first to the last second, in %
    client_cpu_pct: float | None = None  # pgbench's CPU use, % of one core
    client_capacity_pct: float | None = None  # what its threads could use: min(jobs, cpus) x 100
    warnings: tuple[str, ...] = ()

    @property
    def assessed(self) -> bool:
        """
        >>> RunHealth().assessed, RunHealth(measured_s=60, trimmed_s=6).assessed
        (False, True)
        """
        return self != RunHealth()
