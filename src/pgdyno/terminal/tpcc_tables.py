"""The TPC-C-like workload's figures for the terminal: NOPM, TPM, the mix, per-type latency and
the consistency check of a run (pure)."""

from __future__ import annotations

from rich.table import Table

from pgdyno.formatting import fmt
from pgdyno.records.tpcc import TpccResult

# Keying and think times cap a warehouse at about 12.86 new orders a minute (specification
# 5.2.5 and 4.2: the terminals' cycle times), so more than that means they were off.
KEYED_NOPM_PER_WAREHOUSE = 12.86


def tpcc_rows(result: TpccResult) -> list[tuple[str, str]]:
    """The run-detail lines of `runs show` for a TPC-C-like run.

    >>> from pgdyno.records.tpcc import TpccTransaction
    >>> t = TpccTransaction("new_order", 900, 0.45, 1.0, 2.0, 3.0, 4.0, 2, 0)
    >>> rows = dict(tpcc_rows(TpccResult(2, 1780.0, 4000.0, (t,), False, "passed", 10)))
    >>> rows["NOPM"], rows["mix"], rows["consistency"]
    ('1,780.0 (890.0 per warehouse)', 'below the specification minimums: see the table', 'passed')
    """
    options = []
    if result.all_warehouses:
        options.append("every warehouse to every client")
    if result.keying_thinking:
        options.append(
            f"keying and think times on (at most {KEYED_NOPM_PER_WAREHOUSE} NOPM a warehouse)"
        )
    retries = sum(t.retries for t in result.transactions)
    failed = sum(t.failed for t in result.transactions)
    return [
        ("warehouses", str(result.warehouses) + (f" ({'; '.join(options)})" if options else "")),
        ("NOPM", f"{fmt(result.nopm)} ({fmt(result.nopm_per_warehouse)} per warehouse)"),
        ("TPM (this database)", fmt(result.tpm)),
        ("mix", "meets the specification minimums" if result.mix_ok
         else "below the specification minimums: see the table"),
        ("new orders rolled back", f"{result.rollbacks} (about 1% by design)"),
        ("retries / failed", f"{retries} / {failed}"),
        ("consistency", result.consistency),
    ]  # fmt: skip


def tpcc_table(result: TpccResult) -> Table:
    """Per transaction type: count, share of the mix, latency percentiles, retries, failures."""
    table = Table(title="TPC-C-like transactions", title_justify="left")
    for name in ("type", "count", "share %", "p50 ms", "p90 ms", "p99 ms", "max ms", "retries",
                 "failed"):  # fmt: skip
        table.add_column(name, justify="left" if name == "type" else "right")
    for t in result.transactions:
        table.add_row(
            t.name, str(t.count), fmt(100.0 * t.share, 1), fmt(t.p50_ms, 3), fmt(t.p90_ms, 3),
            fmt(t.p99_ms, 3), fmt(t.max_ms, 3), str(t.retries), str(t.failed),
        )  # fmt: skip
    return table
