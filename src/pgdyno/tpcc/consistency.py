"""The TPC-C specification's consistency conditions 1-4 (3.3.2.1-3.3.2.4), checked after a run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from pgdyno.postgres.client import Client
from pgdyno.postgres.tpcc_queries import inconsistency

Row = Sequence[Any]

# Condition number -> what it states and how a failing row reads
# (postgres/queries/tpcc_consistency_<n>.sql).
CONDITIONS: Final[dict[int, tuple[str, Callable[[Row], str]]]] = {
    1: (
        "w_ytd = sum(d_ytd)",
        lambda r: f"warehouse {r[0]} has w_ytd {r[1]} but its districts' d_ytd sum to {r[2]}",
    ),
    2: (
        "d_next_o_id - 1 = max(o_id) = max(no_o_id)",
        lambda r: (
            f"district {r[1]} of warehouse {r[0]} has d_next_o_id - 1 = {r[2]} but max(o_id) "
            f"{_shown(r[3])} and max(no_o_id) {_shown(r[4])}"
        ),
    ),
    3: (
        "max(no_o_id) - min(no_o_id) + 1 = the new_order row count",
        lambda r: (
            f"district {r[1]} of warehouse {r[0]} has new_order ids spanning {r[2]} but {r[3]} rows"
        ),
    ),
    4: (
        "sum(o_ol_cnt) = the order_line row count",
        lambda r: (
            f"district {r[1]} of warehouse {r[0]} has sum(o_ol_cnt) {r[2]} but {r[3]} order lines"
        ),
    ),
}


def check(client: Client) -> str | None:
    """The consistency conditions 1-4 on the database `client` is connected to: None when all
    hold, else one sentence naming the first that fails with one example."""
    for number, (statement, example) in CONDITIONS.items():
        found = inconsistency(client, number)
        if found is not None:
            return (
                f"consistency condition {number} (TPC-C 3.3.2.{number}, {statement}) fails: "
                f"{example(found.values)}."
            )
    return None


def _shown(value: object) -> str:
    return "none" if value is None else str(value)
