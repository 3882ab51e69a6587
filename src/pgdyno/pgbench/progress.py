"""Parse pgbench's `-P 1` progress lines (stderr): its own per-second throughput.

    progress: 3.0 s, 2354.2 tps, lat 0.850 ms stddev 0.559, 0 failed, lag 0.105 ms, 0 skipped

PostgreSQL 14 has no `failed` part; `lag` appears under -R, `skipped` under -R -L, and 15+
adds `retried`/`retries` parts when --max-tries is above 1. Lines that are not progress lines
(connection messages, errors) are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(
    r"^progress: (?P<elapsed>\d+(?:\.\d+)?) s, (?P<tps>\d+(?:\.\d+)?|nan|NaN) tps, "
    r"lat (?P<lat>[\d.]+|nan|NaN|-?inf) ms stddev (?P<sd>[\d.]+|nan|NaN|-?inf)(?P<rest>.*)$"
)
_PART = re.compile(r"(?P<value>[\d.]+|NaN|nan)(?: ms)? (?P<name>failed|skipped|retried|retries)")
_LAG = re.compile(r"lag (?P<lag>[\d.]+|NaN|nan) ms")


@dataclass(frozen=True, slots=True)
class Progress:
    elapsed_s: float  # seconds since the benchmark started, as pgbench counts them
    tps: float
    latency_avg_ms: float | None  # None when no transaction finished in the interval
    latency_stddev_ms: float | None
    failed: int | None  # None on PostgreSQL 14
    lag_ms: float | None  # under -R
    skipped: int | None  # under -R -L


def _number(text: str) -> float | None:
    value = float(text)
    return None if value != value or value in (float("inf"), float("-inf")) else value


def parse_progress_line(line: str) -> Progress | None:
    """
    >>> p = parse_progress_line("progress: 2.0 s, 300.0 tps, lat 0.283 ms stddev 0.088, 0 failed, "
    ...                         "lag 0.102 ms, 0 skipped")
    >>> p.elapsed_s, p.tps, p.lag_ms, p.skipped, p.failed
    (2.0, 300.0, 0.102, 0, 0)
    >>> parse_progress_line("pgbench: error: something") is None
    True
    """
    match = _LINE.match(line.strip())
    if match is None:
        return None
    rest = match.group("rest")
    counts = {m.group("name"): int(float(m.group("value"))) for m in _PART.finditer(rest)}
    lag = _LAG.search(rest)
    return Progress(
        elapsed_s=float(match.group("elapsed")),
        tps=_number(match.group("tps")) or 0.0,
        latency_avg_ms=_number(match.group("lat")),
        latency_stddev_ms=_number(match.group("sd")),
        failed=counts.get("failed"),
        lag_ms=_number(lag.group("lag")) if lag else None,
        skipped=counts.get("skipped"),
    )


def parse_progress(text: str) -> list[Progress]:
    """Every progress line of a pgbench stderr, in order."""
    found = (parse_progress_line(line) for line in text.splitlines())
    return [p for p in found if p is not None]
