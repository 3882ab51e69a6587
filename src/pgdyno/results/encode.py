"""Records as JSON: the results database's JSON columns and what the commands print.

The one place typed records become JSON-ready values (results/decode.py turns them back), so the
database columns and the `--json` outputs keep one shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pgdyno.errors import StoreError
from pgdyno.records.devices import DeviceLayout, RunDevice
from pgdyno.records.health import RunHealth
from pgdyno.records.interference import Interference
from pgdyno.records.profile import CpuProfile
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.tpcc import TpccResult, TpccTransaction
from pgdyno.records.waits import WaitProfile

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# A device's JSON keys in the order pgdyno writes them (the doctor snapshot's order too).
DEVICE_KEYS = tuple(f.name for f in fields(RunDevice) if f.name not in ("role", "stored_keys"))
# A TPC-C-like transaction type's figures as kept, keyed by its name.
TRANSACTION_KEYS = tuple(f.name for f in fields(TpccTransaction) if f.name != "name")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def dumps(value: object, what: str) -> str:
    """JSON for a column; a non-finite number is refused (strict JSON readers reject it).

    >>> dumps({"tps": 1.5}, "summary")
    '{"tps": 1.5}'
    """
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError as exc:  # input checks refuse inf/nan first: reaching here is a bug
        raise StoreError(
            f"refused to store {what} holding a non-finite number ({exc}); this is a bug in "
            "pgdyno: please report it."
        ) from exc


def health_json(health: RunHealth) -> dict[str, object]:
    """A run's health as the runs table keeps it and the commands print it; `{}` when the run
    was not assessed (a failed run).

    >>> health_json(RunHealth(60, 6, 980.5, 2.5, 1.0, 40.0, 200.0, ("noisy",)))["warnings"]
    ['noisy']
    >>> health_json(RunHealth())
    {}
    """
    return _fields(health) if health.assessed else {}


def interference_json(found: Interference) -> dict[str, object]:
    """
    >>> interference_json(Interference(48.2, 0.0, (("yes", 47.5),)))
    {'foreign_cpu_pct': 48.2, 'steal_pct': 0.0, 'top': [['yes', 47.5]]}
    """
    return _fields(found)


def tpcc_json(result: TpccResult) -> dict[str, object]:
    """A TPC-C-like run's figures as `runs show --json` prints them and the runs table keeps
    them: the transactions keyed by type.

    >>> t = TpccTransaction("payment", 43, 0.43, 1.0, 2.0, 3.0, 4.0, 0, 0)
    >>> out = tpcc_json(TpccResult(2, 120.0, 300.0, (t,), True, "passed", 1))
    >>> out["nopm_per_warehouse"], out["transactions"]["payment"]["count"], out["consistency"]
    (60.0, 43, 'passed')
    """
    return {
        "warehouses": result.warehouses,
        "nopm": result.nopm,
        "tpm": result.tpm,
        "nopm_per_warehouse": result.nopm_per_warehouse,
        "transactions": {
            t.name: {key: getattr(t, key) for key in TRANSACTION_KEYS} for t in result.transactions
        },
        "mix_ok": result.mix_ok,
        "consistency": result.consistency,
        "rollbacks": result.rollbacks,
        "all_warehouses": result.all_warehouses,
        "keying_thinking": result.keying_thinking,
    }


def waits_json(found: WaitProfile) -> dict[str, object]:
    """A run's wait profile as the runs table keeps it and `runs show --json` prints it
    (shares are fractions of the client backends' database time).

    >>> from pgdyno.records.waits import WaitShare
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


def profile_json(found: CpuProfile) -> dict[str, object]:
    """A run's on-CPU profile as the runs table keeps it and `runs show --json` prints it
    (shares are fractions of all the samples of the server's processes).

    >>> from pgdyno.records.profile import FunctionShare
    >>> profile_json(CpuProfile(99, 10, 0.2, (("client backend", 1.0),),
    ...              (FunctionShare("client backend", "PortalRun", 0.5),)))["top"]
    [{'process': 'client backend', 'function': 'PortalRun', 'share': 0.5, 'kernel': False}]
    """
    return {
        "sample_hz": found.sample_hz,
        "samples": found.samples,
        "kernel_share": found.kernel_share,
        "by_process": dict(found.by_process),
        "top": [
            {"process": f.process, "function": f.function, "share": f.share, "kernel": f.kernel}
            for f in found.top
        ],
        "folded": dict(found.folded),
        "folded_other": found.folded_other,
    }


def devices_json(layout: DeviceLayout) -> dict[str, object]:
    """A run's devices as the runs table keeps them and the commands print them: `{}` when the
    data directory was not on the host; a device stored by an earlier pgdyno keeps its keys.

    >>> devices_json(DeviceLayout())
    {}
    >>> wal = RunDevice("wal", "/pg_wal", "vda", None, "254:0", "/", "/dev/vda", "ext4", "rw",
    ...                 stored_keys=("path", "name"))
    >>> devices_json(DeviceLayout(True, None, wal, None))
    {'data': None, 'wal': {'path': '/pg_wal', 'name': 'vda'}, 'wal_on_data_device': None}
    """
    if not layout.on_host:
        return {}
    return {
        "data": _device_json(layout.data),
        "wal": _device_json(layout.wal),
        "wal_on_data_device": layout.wal_on_data_device,
    }


def _device_json(device: RunDevice | None) -> dict[str, object] | None:
    if device is None:
        return None
    return {key: _json(getattr(device, key)) for key in device.stored_keys or DEVICE_KEYS}


def rounds_json(rounds: RoundHistory) -> dict[str, object]:
    """The rounds as `compare --json` prints them and the comparisons table keeps them: the
    precision and budget only when the rounds were adaptive; the design that ordered them and
    its seed (what `compare --seed` replays) last.

    >>> rounds_json(RoundHistory("fixed", 2, (("a", "b"), ("b", "a")), 61.0, "repeats"))
    ... # doctest: +NORMALIZE_WHITESPACE
    {'mode': 'fixed', 'rounds': 2, 'order': [['a', 'b'], ['b', 'a']], 'seconds': 61.0,
     'stopped': 'repeats', 'unresolved': None, 'more_rounds': None, 'more_seconds': None,
     'design': 'rotation', 'seed': None}
    """
    adaptive = {
        "precision_pct": rounds.precision_pct,
        "budget_s": rounds.budget_s,
        "mixture_rounds": rounds.mixture_rounds,
    }
    return {
        "mode": rounds.mode,
        **(adaptive if rounds.adaptive else {}),
        "rounds": rounds.rounds,
        "order": _json(rounds.order),
        "seconds": rounds.seconds,
        "stopped": rounds.stopped,
        "unresolved": rounds.unresolved,
        "more_rounds": rounds.more_rounds,
        "more_seconds": rounds.more_seconds,
        "design": rounds.design,
        "seed": rounds.seed,
    }


def to_json(record: object) -> dict[str, object]:
    """A record as the commands print it (`runs show --json`, `runs list --json`, `compare
    --json`, the report): its fields in declaration order, `id` first (a record built on a
    shared part, as StoredComparison on ComparisonPlan, declares its own id after it), nested
    records and tuples as JSON-ready values, health, devices, interference and rounds as the
    results database keeps them."""
    if not is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"not a record: {record!r}")
    return _fields(record)


def _fields(record: DataclassInstance) -> dict[str, object]:
    names = sorted((f.name for f in fields(record)), key=lambda name: name != "id")  # stable
    return {name: _json(getattr(record, name)) for name in names}


def _json(value: object) -> object:
    if isinstance(value, RunHealth):
        return health_json(value)
    if isinstance(value, RoundHistory):
        return rounds_json(value)
    if isinstance(value, DeviceLayout):
        return devices_json(value)
    if isinstance(value, TpccResult):
        return tpcc_json(value)
    if isinstance(value, WaitProfile):
        return waits_json(value)
    if isinstance(value, CpuProfile):
        return profile_json(value)
    if is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value
