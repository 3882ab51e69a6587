"""Comparisons in the results database: the plan, its sets as requested and as in effect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgdyno.store.owners import Owner
from pgdyno.store.results import ResultsStore, dumps, loads, now_iso

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
        me = Owner.me()
        with self.store.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO comparisons (name, plan_path, plan_digest, plan_text, mode,"
                " baseline, scales, started_at, hostname, pid, owner_started)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, plan_path, plan_digest, plan_text, mode, baseline,
                 dumps(scales, "the scales"), now_iso(), me.hostname, me.pid, me.started),
            )  # fmt: skip
            comparison_id = int(cur.lastrowid or 0)
            conn.executemany(
                "INSERT INTO comparison_sets (comparison_id, position, name, requested)"
                " VALUES (?, ?, ?, ?)",
                [
                    (comparison_id, i, n, dumps(req, f"set {n}'s settings"))
                    for i, (n, req) in enumerate(sets)
                ],
            )
            return comparison_id

    def resume(self, comparison_id: int) -> None:
        """This process takes an earlier comparison over (--resume): running again, owned here."""
        me = Owner.me()
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE comparisons SET status = 'running', finished_at = NULL,"
                " found_interrupted_at = NULL, hostname = ?, pid = ?, owner_started = ?"
                " WHERE id = ?",
                (me.hostname, me.pid, me.started, comparison_id),
            )

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
        where = f"comparison {row['id']}"
        row["scales"] = loads(row["scales"], f"{where}'s scales")
        row["sets"] = [
            {
                "name": s["name"],
                "requested": loads(s["requested"], f"{where}'s set {s['name']}"),
                "effective": loads(s["effective"], f"{where}'s set {s['name']}")
                if s["effective"]
                else None,
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
                (dumps(effective, f"set {set_name}'s settings"), comparison_id, set_name),
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
            row["health"] = (
                loads(row["health"], f"run {row['id']}'s health") if row["health"] else {}
            )
        return rows

    def finished_cells(self, comparison_id: int) -> set[tuple[str, str, int, int, int]]:
        """(set, workload, scale, clients, repeat) of the runs that finished successfully."""
        return {
            (r["set_name"], r["workload"], r["scale"], r["clients"], r["repeat"])
            for r in self.runs(comparison_id)
            if r["status"] == "ok"
        }
