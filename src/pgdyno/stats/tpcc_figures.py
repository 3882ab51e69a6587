"""The TPC-C-like figures of a run from its counters and pgbench's per-script log (pure).

* NOPM: new orders per minute, the increase of ``sum(district.d_next_o_id)`` over the measured
  window divided by its minutes. A new order rolled back for its unused item (1% by design,
  specification 2.4.1.4) does not move ``d_next_o_id``; it is a successful pgbench transaction,
  so the rollbacks are the new-order script's count minus that increase.
* TPM: commits plus rollbacks per minute of the benchmark database (pg_stat_database), not of
  the whole cluster as HammerDB counts them.
* The mix: each type's share of the successful transactions against the specification's minimums
  (5.2.3: payment 43%, order-status, delivery and stock-level 4% each). pgbench draws each
  transaction's script at random by weight, so with weights at the minimums the observed share
  falls below them in about half of all runs; a share is accepted when it is within four
  standard errors of its minimum (a fair draw from weights that meet the minimums fails this in
  about 1 run in 30,000 per type, while a share of 2% where 4% is due fails it from about 2,000
  transactions on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from pgdyno.records.tpcc import TpccResult, TpccTransaction

__all__ = ["MINIMUM_SHARE", "ScriptFigures", "mix_ok", "rollbacks", "tpcc_result"]

# Specification 5.2.3: the smallest share of each type over the measured window.
MINIMUM_SHARE: Final[Mapping[str, float]] = {
    "new_order": 0.0,
    "payment": 0.43,
    "order_status": 0.04,
    "delivery": 0.04,
    "stock_level": 0.04,
}
TOLERANCE_SE: Final = 4.0  # standard errors a share may fall short of its minimum by chance


class ScriptFigures(Protocol):
    """What the per-script summary of pgbench's transaction log gives for one script."""

    @property
    def transactions(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def retries(self) -> int | None: ...  # None: the log had no retries column (--max-tries 1)
    @property
    def p50_ms(self) -> float | None: ...
    @property
    def p90_ms(self) -> float | None: ...
    @property
    def p99_ms(self) -> float | None: ...
    @property
    def max_ms(self) -> float | None: ...


def mix_ok(counts: Mapping[str, int]) -> bool:
    """Every type's share at or above its minimum, within TOLERANCE_SE standard errors.

    >>> mix_ok({"new_order": 450, "payment": 430, "order_status": 40, "delivery": 40,
    ...         "stock_level": 40})
    True
    >>> mix_ok({"new_order": 900, "payment": 100, "order_status": 0, "delivery": 0,
    ...         "stock_level": 0})
    False
    """
    total = sum(counts.values())
    if total == 0:
        return False
    for name, minimum in MINIMUM_SHARE.items():
        share = counts.get(name, 0) / total
        slack = TOLERANCE_SE * math.sqrt(minimum * (1.0 - minimum) / total)
        if share < minimum - slack:
            return False
    return True


def rollbacks(new_order_count: int, new_orders: int) -> int:
    """New-order transactions that rolled back: pgbench's successes that made no order.

    >>> rollbacks(1000, 989), rollbacks(10, 12)
    (11, 0)
    """
    return max(0, new_order_count - new_orders)


def tpcc_result(
    warehouses: int,
    window_s: float,
    new_orders: int,
    xacts: int | None,
    scripts: Sequence[tuple[str, ScriptFigures]],
    consistency: str,
) -> TpccResult:
    """The run's figures: ``new_orders`` is the increase of ``sum(d_next_o_id)`` over the
    measured window of ``window_s`` seconds, ``xacts`` that of commits plus rollbacks of the
    benchmark database (None when unknown); ``scripts`` the per-script figures by type name.

    >>> from types import SimpleNamespace as S
    >>> f = lambda n: S(transactions=n, failed=0, retries=1, p50_ms=1.0, p90_ms=2.0,
    ...                 p99_ms=3.0, max_ms=4.0)
    >>> r = tpcc_result(2, 60.0, 890, 2000, [("new_order", f(900)), ("payment", f(860)),
    ...     ("order_status", f(80)), ("delivery", f(80)), ("stock_level", f(80))], "passed")
    >>> r.nopm, r.tpm, r.rollbacks, r.mix_ok, r.nopm_per_warehouse
    (890.0, 2000.0, 10, True, 445.0)
    """
    minutes = window_s / 60.0
    total = sum(f.transactions for _, f in scripts)
    transactions = tuple(
        TpccTransaction(
            name=name,
            count=f.transactions,
            share=f.transactions / total if total else 0.0,
            p50_ms=f.p50_ms,
            p90_ms=f.p90_ms,
            p99_ms=f.p99_ms,
            max_ms=f.max_ms,
            retries=f.retries or 0,
            failed=f.failed,
        )
        for name, f in scripts
    )
    counts = {t.name: t.count for t in transactions}
    return TpccResult(
        warehouses=warehouses,
        nopm=new_orders / minutes if minutes > 0 else 0.0,
        tpm=xacts / minutes if xacts is not None and minutes > 0 else None,
        transactions=transactions,
        mix_ok=mix_ok(counts),
        consistency=consistency,
        rollbacks=rollbacks(counts.get("new_order", 0), new_orders),
    )
