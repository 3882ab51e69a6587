"""Comparisons in the results database: the plan, its sets as requested and as in effect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import NewComparison, RunOutcome, StoredComparison
from pgdyno.results.database import Database
from pgdyno.results.decode import OUTCOME_SQL, comparison, run_outcome
from pgdyno.results.encode import dumps, now_iso, rounds_json
from pgdyno.results.owners import Owner
from pgdyno.results.uids import new_uid


class Comparisons:
    """Reads and writes the comparison tables of one results database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, new: NewComparison) -> int:
        me = Owner.me()
        with self.db.transaction():
            comparison_id = self.db.insert(
                "INSERT INTO comparisons (name, plan_path, plan_digest, plan_text, mode,"
                " baseline, scales, started_at, hostname, pid, owner_started, uid)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (new.name, new.plan_path, new.plan_digest, new.plan_text, new.mode,
                 new.baseline, dumps(list(new.scales), "the scales"), now_iso(), me.hostname,
                 me.pid, me.started, new_uid()),
            )  # fmt: skip
            self.db.executemany(
                "INSERT INTO comparison_sets (comparison_id, position, name, requested)"
                " VALUES (?, ?, ?, ?)",
                [
                    (comparison_id, i, n, dumps(req, f"set {n}'s settings"))
                    for i, (n, req) in enumerate(new.sets)
                ],
            )
            return comparison_id

    def resume(self, comparison_id: int) -> None:
        """This process takes an earlier comparison over (--resume): running again, owned here."""
        me = Owner.me()
        with self.db.transaction():
            self.db.execute(
                "UPDATE comparisons SET status = 'running', finished_at = NULL,"
                " found_interrupted_at = NULL, hostname = ?, pid = ?, owner_started = ?"
                " WHERE id = ?",
                (me.hostname, me.pid, me.started, comparison_id),
            )

    def latest(self, plan_digest: str) -> StoredComparison | None:
        """The newest comparison of exactly this plan text, for --resume."""
        rows = self.db.query(
            "SELECT * FROM comparisons WHERE plan_digest = ? ORDER BY id DESC LIMIT 1",
            (plan_digest,),
        )
        return self._decode(rows[0]) if rows else None

    def get(self, comparison_id: int) -> StoredComparison | None:
        rows = self.db.query("SELECT * FROM comparisons WHERE id = ?", (comparison_id,))
        return self._decode(rows[0]) if rows else None

    def _decode(self, row: dict[str, Any]) -> StoredComparison:
        sets = self.db.query(
            "SELECT name, requested, effective FROM comparison_sets WHERE comparison_id = ?"
            " ORDER BY position",
            (row["id"],),
        )
        return comparison(row, sets)

    def record_effective(
        self, comparison_id: int, set_name: str, effective: Mapping[str, object]
    ) -> None:
        with self.db.transaction():
            self.db.execute(
                "UPDATE comparison_sets SET effective = ? WHERE comparison_id = ? AND name = ?",
                (dumps(effective, f"set {set_name}'s settings"), comparison_id, set_name),
            )

    def record_rounds(self, comparison_id: int, rounds: RoundHistory) -> None:
        """How the rounds went so far (rewritten after every round)."""
        with self.db.transaction():
            self.db.execute(
                "UPDATE comparisons SET rounds = ? WHERE id = ?",
                (dumps(rounds_json(rounds), "the rounds"), comparison_id),
            )

    def finish(self, comparison_id: int, status: str) -> None:
        with self.db.transaction():
            self.db.execute(
                "UPDATE comparisons SET status = ?, finished_at = ? WHERE id = ?",
                (status, now_iso(), comparison_id),
            )

    def runs(self, comparison_id: int) -> list[RunOutcome]:
        rows = self.db.query(
            f"SELECT {OUTCOME_SQL} FROM runs WHERE comparison_id = ? ORDER BY id",
            (comparison_id,),
        )
        return [run_outcome(row) for row in rows]

    def run_ids(self, comparison_id: int) -> list[int]:
        return [run.id for run in self.runs(comparison_id)]

    def finished_cells(self, comparison_id: int) -> set[tuple[str, str, int, int, int]]:
        """(set, workload, scale, clients, repeat) of the runs that finished successfully."""
        return {
            (r.set_name or "", r.workload, r.scale, r.clients, r.repeat)
            for r in self.runs(comparison_id)
            if r.status == "ok"
        }
