"""A run's wait profile as the runs table keeps it and `runs show --json` prints it, and back.

    {"source", "sample_hz", "samples", "db_time_s", "by_type": {TYPE: share},
     "top": [{"event": "TYPE:NAME", "share", "aas"}], "other",
     "background": [{"process", "event", "aas"}]}

Shares are fractions of the client backends' database time (0..1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgdyno.records.waits import BackgroundWait, WaitProfile, WaitShare

Json = Any


def waits_json(found: WaitProfile) -> dict[str, object]:
    """
    >>> waits_json(WaitProfile("pg_stat_activity", 10, 200, 31.5, (("CPU*", 1.0),),
    ...                        (WaitShare("CPU*", 1.0, 1.6),)))["by_type"]
    {'CPU*': 1.0}
    """
    return {
        "source": found.source,
        "sample_hz": found.sample_hz,
        "samples": found.samples,
        "db_time_s": found.db_time_s,
        "by_type": dict(found.by_type),
        "top": [{"event": w.event, "share": w.share, "aas": w.aas} for w in found.top],
        "other": found.other,
        "background": [
            {"process": b.process, "event": b.event, "aas": b.aas} for b in found.background
        ],
    }


def _num(blob: Mapping[str, Json], key: str) -> float:
    value = blob.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 0.0


def _entries(value: Json) -> list[Mapping[str, Json]]:
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def waits(blob: Mapping[str, Json] | None) -> WaitProfile | None:
    """A profile as `waits_json` wrote it (None for a run without one); tolerant of missing
    keys, which read as 0 or nothing.

    >>> p = WaitProfile("pg_stat_activity", 10.0, 200, 31.5, (("CPU*", 0.6), ("IO", 0.4)),
    ...                 (WaitShare("CPU*", 0.6, 1.0), WaitShare("IO:WalSync", 0.4, 0.7)), 0.0,
    ...                 (BackgroundWait("walwriter", "IO:WalWrite", 0.1),))
    >>> waits(waits_json(p)) == p, waits(None)
    (True, None)
    """
    if blob is None:
        return None
    by_type = blob.get("by_type")
    return WaitProfile(
        source=str(blob.get("source") or ""),
        sample_hz=_num(blob, "sample_hz"),
        samples=int(_num(blob, "samples")),
        db_time_s=_num(blob, "db_time_s"),
        by_type=tuple(
            (str(k), float(v))
            for k, v in (by_type.items() if isinstance(by_type, dict) else ())
            if isinstance(v, int | float) and not isinstance(v, bool)
        ),
        top=tuple(
            WaitShare(str(e.get("event")), _num(e, "share"), _num(e, "aas"))
            for e in _entries(blob.get("top"))
        ),
        other=_num(blob, "other"),
        background=tuple(
            BackgroundWait(str(e.get("process")), str(e.get("event")), _num(e, "aas"))
            for e in _entries(blob.get("background"))
        ),
    )
