"""Rows of the results database into frozen records: the one place rows become types.

Every backend reads the same columns, so a second backend (PostgreSQL) decodes its rows here
too. JSON columns are parsed here; damaged text is named instead of failing obscurely.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pgdyno.errors import StoreUnavailable
from pgdyno.records import Event, SecondRow, StatementLatency
from pgdyno.records.capacity import Capacity, CapacityStep, Knee
from pgdyno.records.devices import DeviceLayout, RunDevice
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.profile import CpuProfile, FunctionShare
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import (
    ComparisonSet,
    Json,
    JsonObject,
    RunListing,
    RunOutcome,
    StoredComparison,
    StoredRun,
)
from pgdyno.records.tpcc import TpccResult, TpccTransaction
from pgdyno.records.waits import BackgroundWait, WaitProfile, WaitShare
from pgdyno.results.encode import DEVICE_KEYS

Row = Mapping[str, Any]

# The runs table's own columns, in table order: the head of StoredRun's fields.
_SESSION_FIELDS = ("host", "server", "target", "session_status")
_CHILD_FIELDS = ("seconds", "statements", "samples", "events")
RUN_ROW_COLUMNS = tuple(
    f.name for f in fields(StoredRun) if f.name not in _SESSION_FIELDS + _CHILD_FIELDS
)
RUN_ROW_SQL = ", ".join(RUN_ROW_COLUMNS)
# The runs columns a comparison's analysis needs.
OUTCOME_SQL = ", ".join(f.name for f in fields(RunOutcome))
_OBJECT_COLUMNS = ("settings", "summary", "devices")


def loads(text: str, where: str) -> Any:
    """A JSON column read back; damaged text is named instead of failing obscurely."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreUnavailable(
            f"{where} in the results database holds damaged JSON ({exc}): the file was "
            "changed outside pgdyno; restore it from a copy or pass another --results file."
        ) from exc


def _object(text: str | None, where: str) -> JsonObject | None:
    """A JSON column that holds an object (or NULL); any other shape is damage too."""
    if text is None:
        return None
    value = loads(text, where)
    if not isinstance(value, dict):
        raise StoreUnavailable(
            f"{where} in the results database holds {type(value).__name__} where an object "
            "belongs: the file was changed outside pgdyno; restore it from a copy or pass "
            "another --results file."
        )
    return value


def _list(text: str, where: str) -> tuple[Any, ...]:
    value = loads(text, where)
    if not isinstance(value, list):
        raise StoreUnavailable(
            f"{where} in the results database holds {type(value).__name__} where a list "
            "belongs: the file was changed outside pgdyno; restore it from a copy or pass "
            "another --results file."
        )
    return tuple(value)


def _number(blob: Mapping[str, Json], key: str) -> Any:
    """A number as stored (an int stays an int, so what is printed stays the same), else None."""
    value = blob.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def health(blob: Mapping[str, Json] | None) -> RunHealth:
    """A run's health as stored; tolerant of what earlier versions kept (a missing figure is
    None, `{}` a run that was not assessed).

    >>> found = health({"tps_cv_pct": 3, "warnings": ["noisy"]})
    >>> found.tps_cv_pct, found.measured_s, found.warnings
    (3, None, ('noisy',))
    >>> health({}) == health(None) == RunHealth()
    True
    """
    blob = blob or {}
    warnings = blob.get("warnings")
    return RunHealth(
        **{f.name: _number(blob, f.name) for f in fields(RunHealth) if f.name != "warnings"},
        warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
    )


def interference(blob: Mapping[str, Json] | None) -> Interference | None:
    """
    >>> interference({"foreign_cpu_pct": 48.2, "steal_pct": 0.0, "top": [["yes", 47.5]]})
    Interference(foreign_cpu_pct=48.2, steal_pct=0.0, top=(('yes', 47.5),))
    >>> interference(None) is None
    True
    """
    if blob is None:
        return None
    top = blob.get("top")
    return Interference(
        # float(): a stored 0.0 reads back as 0.0, never as the integer 0 (`or` would give it)
        foreign_cpu_pct=float(_number(blob, "foreign_cpu_pct") or 0.0),
        steal_pct=float(_number(blob, "steal_pct") or 0.0),
        top=tuple(
            (str(entry[0]), float(entry[1]))
            for entry in (top if isinstance(top, list) else [])
            if isinstance(entry, list) and len(entry) == 2
            and isinstance(entry[1], int | float) and not isinstance(entry[1], bool)
        ),
    )  # fmt: skip


def devices(blob: Mapping[str, Json] | None) -> DeviceLayout | None:
    """A run's devices as stored (None for runs stored before they were kept); tolerant of
    what earlier versions kept: a missing key reads as None ("" for a text) and the device
    remembers the keys it had, so it prints as stored.

    >>> found = devices({"data": {"path": "/d", "name": "vda", "rotational": True},
    ...                  "wal": None, "wal_on_data_device": None})
    >>> found.data.name, found.data.disk, found.data.stored_keys, found.wal
    ('vda', None, ('path', 'name', 'rotational'), None)
    >>> devices({}) == DeviceLayout(), devices(None)
    (True, None)
    """
    if blob is None:
        return None
    same = blob.get("wal_on_data_device")
    return DeviceLayout(
        on_host=bool(blob),
        data=_device("data", blob.get("data")),
        wal=_device("wal", blob.get("wal")),
        wal_on_data_device=same if isinstance(same, bool) else None,
    )


def _device(role: str, entry: Json) -> RunDevice | None:
    if not isinstance(entry, dict):
        return None
    keys = tuple(key for key in entry if key in DEVICE_KEYS)
    schedulers = entry.get("schedulers")

    def text(key: str) -> str:
        return _text(entry.get(key)) or ""

    def flag(key: str) -> bool | None:
        value = entry.get(key)
        return value if isinstance(value, bool) else None

    return RunDevice(
        role, text("path"), text("name"), _text(entry.get("disk")), text("major_minor"),
        text("mount_point"), text("source"), text("fstype"), text("mount_options"),
        flag("rotational"), flag("nvme"), flag("virtual"), _text(entry.get("scheduler")),
        tuple(str(s) for s in schedulers) if isinstance(schedulers, list) else None,
        _integer(entry, "read_ahead_kb"), _integer(entry, "free_bytes"),
        stored_keys=None if keys == DEVICE_KEYS else keys,
    )  # fmt: skip


def _integer(blob: Mapping[str, Json], key: str) -> int | None:
    value = blob.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rounds(blob: Mapping[str, Json] | None) -> RoundHistory | None:
    """A comparison's rounds as stored (None for comparisons stored before they were kept);
    rounds stored before issue 33 were rotated and have no seed.

    >>> old = rounds({"mode": "fixed", "rounds": 1, "order": [["a", "b"]], "seconds": 30.5,
    ...         "stopped": "repeats"})
    >>> old.order, old.design, old.seed
    ((('a', 'b'),), 'rotation', None)
    """
    if blob is None:
        return None
    order = blob.get("order")
    count = blob.get("rounds")
    return RoundHistory(
        mode=_text(blob.get("mode")) or "fixed",
        rounds=count if isinstance(count, int) and not isinstance(count, bool) else 0,
        order=tuple(
            tuple(str(name) for name in names)
            for names in (order if isinstance(order, list) else [])
            if isinstance(names, list)
        ),
        seconds=_number(blob, "seconds") or 0.0,
        stopped=_text(blob.get("stopped")),
        unresolved=_number(blob, "unresolved"),
        more_rounds=_number(blob, "more_rounds"),
        more_seconds=_number(blob, "more_seconds"),
        precision_pct=_number(blob, "precision_pct"),
        budget_s=_number(blob, "budget_s"),
        design=_text(blob.get("design")) or "rotation",
        seed=_integer(blob, "seed"),
        mixture_rounds=_integer(blob, "mixture_rounds"),  # absent before issue 33: MIXTURE_G
    )


def stored_run(
    run: Row,
    session: Row,
    seconds: list[dict[str, Any]],
    statements: list[dict[str, Any]],
    events: list[dict[str, Any]],
    samples: Mapping[str, Mapping[int, float]],
) -> StoredRun:
    run_id = run["id"]
    decoded = {c: _object(run[c], f"run {run_id}'s {c}") for c in _OBJECT_COLUMNS}
    argv = _list(run["pgbench_argv"], f"run {run_id}'s pgbench_argv")
    where = f"session {session['id']}"
    blob = _object(run["health"], f"run {run_id}'s health")
    typed = {
        "health": None if blob is None else health(blob),
        "interference": _interference(run),
        "devices": devices(decoded["devices"]),
        "tpcc": _tpcc(run),
        "waits": waits(_object(run["waits"], f"run {run_id}'s wait profile")),
        "profile": profile(_object(run["profile"], f"run {run_id}'s CPU profile")),
    }
    return StoredRun(
        **{**run, **decoded, **typed, "pgbench_argv": argv},
        host=_object(session["host"], f"{where}'s host") or {},
        server=_object(session["server"], f"{where}'s server") or {},
        target=session["target"],
        session_status=session["status"],
        seconds=tuple(SecondRow(**s) for s in seconds),
        statements=tuple(StatementLatency(**s) for s in statements),
        samples=samples,
        events=tuple(
            Event(e["t"], e["kind"], dict(_object(e["detail"], f"an event of run {run_id}") or {}))
            for e in events
        ),
    )


def _interference(row: Row) -> Interference | None:
    return interference(_object(row["interference"], f"run {row['id']}'s interference"))


def _tpcc(row: Row) -> TpccResult | None:
    return tpcc(_object(row.get("tpcc"), f"run {row['id']}'s TPC-C figures"))


def tpcc(blob: Mapping[str, Json] | None) -> TpccResult | None:
    """A TPC-C-like run's figures as results/encode.py `tpcc_json` wrote them.

    >>> found = tpcc({"warehouses": 2, "nopm": 120.0, "tpm": None, "transactions": {"payment":
    ...     {"count": 43, "share": 0.43, "p50_ms": 1.0, "p90_ms": 2, "p99_ms": 3.0,
    ...      "max_ms": 4.0, "retries": 0, "failed": 0}}, "mix_ok": True, "consistency": "passed",
    ...     "rollbacks": 1})
    >>> found.nopm_per_warehouse, found.transactions[0].p90_ms, found.tpm
    (60.0, 2.0, None)
    >>> tpcc(None) is None
    True
    """
    if blob is None:
        return None
    kinds = blob.get("transactions")
    return TpccResult(
        warehouses=int(_number(blob, "warehouses") or 0),
        nopm=float(_number(blob, "nopm") or 0.0),
        tpm=_float(_number(blob, "tpm")),
        transactions=tuple(
            _transaction(str(name), figures)
            for name, figures in (kinds.items() if isinstance(kinds, dict) else [])
            if isinstance(figures, dict)
        ),
        mix_ok=blob.get("mix_ok") is True,
        consistency=str(blob.get("consistency") or "not checked"),
        rollbacks=int(_number(blob, "rollbacks") or 0),
        all_warehouses=blob.get("all_warehouses") is True,
        keying_thinking=blob.get("keying_thinking") is True,
    )


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _transaction(name: str, figures: Mapping[str, Json]) -> TpccTransaction:
    return TpccTransaction(
        name=name,
        count=int(_number(figures, "count") or 0),
        share=float(_number(figures, "share") or 0.0),
        p50_ms=_float(_number(figures, "p50_ms")),
        p90_ms=_float(_number(figures, "p90_ms")),
        p99_ms=_float(_number(figures, "p99_ms")),
        max_ms=_float(_number(figures, "max_ms")),
        retries=int(_number(figures, "retries") or 0),
        failed=int(_number(figures, "failed") or 0),
    )


def _float_of(blob: Mapping[str, Json], key: str) -> float:
    return float(_number(blob, key) or 0.0)


def _objects(value: Json) -> list[Mapping[str, Json]]:
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def waits(blob: Mapping[str, Json] | None) -> WaitProfile | None:
    """A wait profile as encode.py `waits_json` wrote it (None for a run without one); a missing
    key reads as 0 or nothing.

    >>> from pgdyno.results.encode import waits_json
    >>> p = WaitProfile("pg_stat_activity", 10.0, 200, 31.5, (("CPU*", 0.6), ("IO", 0.4)),
    ...                 (WaitShare("CPU*", 0.6, 1.0), WaitShare("IO:WalSync", 0.4, 0.7)), 0.0,
    ...                 (BackgroundWait("walwriter", "IO:WalWrite", 0.1),))
    >>> waits(waits_json(p)) == p, waits(None)
    (True, None)
    """
    if blob is None:
        return None
    found = blob.get("by_type")
    by_type: Mapping[str, Json] = found if isinstance(found, dict) else {}
    return WaitProfile(
        source=_text(blob.get("source")) or "",
        sample_hz=_float_of(blob, "sample_hz"),
        samples=int(_number(blob, "samples") or 0),
        db_time_s=_float_of(blob, "db_time_s"),
        by_type=tuple((str(k), _float_of(by_type, k)) for k in by_type),
        top=tuple(
            WaitShare(str(e.get("event")), _float_of(e, "share"), _float_of(e, "aas"))
            for e in _objects(blob.get("top"))
        ),
        other=_float_of(blob, "other"),
        background=tuple(
            BackgroundWait(str(e.get("process")), str(e.get("event")), _float_of(e, "aas"))
            for e in _objects(blob.get("background"))
        ),
    )


def profile(blob: Mapping[str, Json] | None) -> CpuProfile | None:
    """An on-CPU profile as encode.py `profile_json` wrote it (None for a run without one); a
    missing key reads as 0 or nothing.

    >>> from pgdyno.results.encode import profile_json
    >>> p = CpuProfile(99.0, 40, 0.25, (("client backend", 0.75), ("walwriter", 0.25)),
    ...                (FunctionShare("client backend", "PortalRun", 0.5),
    ...                 FunctionShare("walwriter", "copy_page", 0.25, True)),
    ...                (("client backend;PortalRun", 20),), 20)
    >>> profile(profile_json(p)) == p, profile(None)
    (True, None)
    """
    if blob is None:
        return None
    found = blob.get("by_process")
    by_process: Mapping[str, Json] = found if isinstance(found, dict) else {}
    found = blob.get("folded")
    folded: Mapping[str, Json] = found if isinstance(found, dict) else {}
    return CpuProfile(
        sample_hz=_float_of(blob, "sample_hz"),
        samples=int(_number(blob, "samples") or 0),
        kernel_share=_float_of(blob, "kernel_share"),
        by_process=tuple((str(k), _float_of(by_process, k)) for k in by_process),
        top=tuple(
            FunctionShare(
                str(e.get("process")),
                str(e.get("function")),
                _float_of(e, "share"),
                e.get("kernel") is True,
            )
            for e in _objects(blob.get("top"))
        ),
        folded=tuple((str(k), int(_float_of(folded, k))) for k in folded),
        folded_other=int(_number(blob, "folded_other") or 0),
    )


def run_listing(row: Row) -> RunListing:
    """A runs row joined with its session's status and host facts (`session_host`)."""
    fields = {k: v for k, v in row.items() if k != "session_host"}
    host = _object(row["session_host"], f"session {row['session_id']}'s host") or {}
    return RunListing(
        **{**fields, "interference": _interference(row), "tpcc": _tpcc(row)},
        host=str(host.get("hostname") or ""),
    )


def run_outcome(row: Row) -> RunOutcome:
    blob = _object(row["health"], f"run {row['id']}'s health") if row["health"] else None
    typed = {
        "health": health(blob),
        "interference": _interference(row),
        "tpcc": _tpcc(row),
        "waits": waits(_object(row["waits"], f"run {row['id']}'s wait profile")),
        "profile": profile(_object(row["profile"], f"run {row['id']}'s CPU profile")),
    }
    return RunOutcome(**{**row, **typed})


def comparison(row: Row, sets: list[dict[str, Any]]) -> StoredComparison:
    where = f"comparison {row['id']}"
    return StoredComparison(
        **{
            **{k: v for k, v in row.items() if k != "uid"},
            "scales": _list(row["scales"], f"{where}'s scales"),
            "rounds": rounds(_object(row.get("rounds"), f"{where}'s rounds")),
        },
        sets=tuple(
            ComparisonSet(
                s["name"],
                _object(s["requested"], f"{where}'s set {s['name']}") or {},
                _object(s["effective"] or None, f"{where}'s set {s['name']}"),
            )
            for s in sets
        ),
    )


def capacity(blob: Json, where: str) -> Capacity:
    """A capacity sweep as encode.py `to_json` wrote it; a missing figure reads as None.

    >>> from pgdyno.results.encode import to_json
    >>> from pgdyno.records.capacity import Knee
    >>> step = CapacityStep(7, "sweep", 500.0, 498.2, 0.3, 0.5, 1.2, 0.05, 1.1, 0, 30.0, 200.0,
    ...                     "under")
    >>> found = Capacity(2.0, (step,), 2000.0, 500.0, 560.0, 0.9375, Knee(500.0, 498.2, 1.2),
    ...                  "bracketed", 5, ("a note",))
    >>> capacity(to_json(found), "here") == found
    True
    """
    if not isinstance(blob, dict):
        raise StoreUnavailable(
            f"{where} in the results database is not an object: the file was changed outside "
            "pgdyno; restore it from a copy or pass another --results file."
        )
    knee = blob.get("knee")
    return Capacity(
        target_p99_ms=_float_of(blob, "target_p99_ms"),
        steps=tuple(_capacity_step(s) for s in _objects(blob.get("steps"))),
        closed_tps=_float_or_none(blob, "closed_tps"),
        capacity_tps=_float_or_none(blob, "capacity_tps"),
        over_tps=_float_or_none(blob, "over_tps"),
        confidence=_float_of(blob, "confidence"),
        knee=Knee(_float_of(knee, "asked_tps"), _float_of(knee, "achieved_tps"),
                  _float_of(knee, "p99_ms")) if isinstance(knee, dict) else None,
        stopped=_text(blob.get("stopped")) or "",
        repeats=_integer(blob, "repeats") or 0,
        notes=tuple(n for n in _json_list(blob.get("notes")) if isinstance(n, str)),
    )  # fmt: skip


def _capacity_step(blob: Mapping[str, Json]) -> CapacityStep:
    run_id = _integer(blob, "run_id")
    return CapacityStep(
        run_id=run_id, phase=_text(blob.get("phase")) or "",
        asked_tps=_float_or_none(blob, "asked_tps"),
        achieved_tps=_float_of(blob, "achieved_tps"),
        p50_ms=_float_or_none(blob, "p50_ms"), p90_ms=_float_or_none(blob, "p90_ms"),
        p99_ms=_float_or_none(blob, "p99_ms"), lag_avg_ms=_float_or_none(blob, "lag_avg_ms"),
        lag_max_ms=_float_or_none(blob, "lag_max_ms"), skipped=_integer(blob, "skipped") or 0,
        client_cpu_pct=_float_or_none(blob, "client_cpu_pct"),
        client_capacity_pct=_float_or_none(blob, "client_capacity_pct"),
        verdict=_text(blob.get("verdict")) or "",
        lag_growth_ms=_float_or_none(blob, "lag_growth_ms"),  # absent in the first sweeps
        p95_ms=_float_or_none(blob, "p95_ms"),  # absent in the sweeps before it was kept
    )  # fmt: skip


def _float_or_none(blob: Mapping[str, Json], key: str) -> float | None:
    value = _number(blob, key)
    return None if value is None else float(value)


def _json_list(value: Json) -> list[Json]:
    return value if isinstance(value, list) else []
