"""Comparisons in the results database: the plan, its sets as requested and as in effect."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pgdyno.store.results import ResultsStore, now_iso

# What a comparison's analysis needs of each run.
_RUN_FIELDS = (
    "id", "set_name", "status", "workload", "scale", "clients", "repeat", "tps",
    "latency_p99_ms", "latency_avg_ms", "health", "pg_version",
)  # fmt: skip


class Comparisons:
    """Reads and writes the comparison tables of one results database."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store

    def create(
        self,
        *,
        name: str,
        plan_path: str,
        plan_digest: str,
        plan_text: str,
        mode: str,
        baseline: str,
        scales: list[int],
        sets: list[tuple[str, Mapping[str, Any]]],
    ) -> int:
        with self.store.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO comparisons (name, plan_path, plan_digest, plan_text, mode,"
                " baseline, scales, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name, plan_path, plan_digest, plan_text, mode, baseline, json.dumps(scales),
                 now_iso()),
            )  # fmt: skip
            comparison_id = int(cur.lastrowid or 0)
            conn.executemany(
                "INSERT INTO comparison_sets (comparison_id, position, name, requested)"
                " VALUES (?, ?, ?, ?)",
                [(comparison_id, i, n, json.dumps(req)) for i, (n, req) in enumerate(sets)],
            )
            return comparison_id

    def latest(self, plan_digest: str) -> dict[str, Any] | None:
        """The newest comparison of exactly this plan text, for --resume."""
        rows = self.store.query(
            "SELECT * FROM comparisons WHERE plan_digest = ? ORDER BY id DESC LIMIT 1",
            (plan_digest,),
        )
        return self._decode(rows[0]) if rows else None

    def get(self, comparison_id: int) -> dict[str, Any] | None:
        rows = self.store.query("SELECT * FROM comparisons WHERE id = ?", (comparison_id,))
        return self._decode(rows[0]) if rows else None

    def _decode(self, row: dict[str, Any]) -> dict[str, Any]:
        row["scales"] = json.loads(row["scales"])
        row["sets"] = [
            {
                "name": s["name"],
                "requested": json.loads(s["requested"]),
                "effective": json.loads(s["effective"]) if s["effective"] else None,
            }
            for s in self.store.query(
                "SELECT * FROM comparison_sets WHERE comparison_id = ? ORDER BY position",
                (row["id"],),
            )
        ]
        return row

    def record_effective(
        self, comparison_id: int, set_name: str, effective: Mapping[str, Any]
    ) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE comparison_sets SET effective = ? WHERE comparison_id = ? AND name = ?",
                (json.dumps(effective), comparison_id, set_name),
            )

    def finish(self, comparison_id: int, status: str) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE comparisons SET status = ?, finished_at = ? WHERE id = ?",
                (status, now_iso(), comparison_id),
            )

    def runs(self, comparison_id: int) -> list[dict[str, Any]]:
        rows = self.store.query(
            f"SELECT {', '.join(_RUN_FIELDS)} FROM runs WHERE comparison_id = ? ORDER BY id",
            (comparison_id,),
        )
        for row in rows:
            row["health"] = json.loads(row["health"]) if row["health"] else {}
        return rows

    def finished_cells(self, comparison_id: int) -> set[tuple[str, str, int, int, int]]:
        """(set, workload, scale, clients, repeat) of the runs that finished successfully."""
        return {
            (r["set_name"], r["workload"], r["scale"], r["clients"], r["repeat"])
            for r in self.runs(comparison_id)
            if r["status"] == "ok"
        }
