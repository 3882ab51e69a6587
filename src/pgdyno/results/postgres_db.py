"""A results database on a PostgreSQL server, shared by pgdyno processes on many hosts.

The tables are SQLite's (one migration history, rewritten by results/migrate.py `for_postgres`);
ids come from identity columns, so concurrent writers never collide, and every migration runs
under one advisory lock, so processes starting at once apply each exactly once.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pgdyno.errors import StoreUnavailable, UsageError
from pgdyno.postgres.footprint import is_pgdyno_name
from pgdyno.postgres.results_db import ResultsConnection
from pgdyno.results.migrate import SCHEMA_TABLE, for_postgres, pending

# What a writing command does to each table: insert rows, and update statuses.
_INSERTED = ("sessions", "runs", "run_seconds", "run_samples", "run_events", "run_statements",
             "comparisons", "comparison_sets")  # fmt: skip
_UPDATED = ("sessions", "comparisons", "comparison_sets")


class PostgresDatabase(ResultsConnection):
    """store.database.Database on a PostgreSQL database (`--results postgresql://...`)."""

    def schema_version(self) -> int:
        if not self.has_table("schema_migrations"):
            return 0
        row = self.query("SELECT max(version) AS v FROM schema_migrations")[0]
        return int(row["v"] or 0)

    def migrate(self, target: int | None = None) -> list[int]:
        """All pending migrations in one transaction, under the schema lock."""
        if not pending(self.schema_version(), target):
            return []  # the common case: no lock taken, nothing written
        with self.transaction():
            self.lock_schema()
            self.script(for_postgres(SCHEMA_TABLE))
            applied = []
            for version, name, script in pending(self.schema_version(), target):
                self.script(for_postgres(script))
                self.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (version, name, datetime.now(UTC).isoformat(timespec="seconds")),
                )
                applied.append(version)
            return applied

    def check_not_managed(self) -> None:
        """Refuse a database pgdyno itself drops and re-creates (the bench copy, a dataset
        template): benchmarking its server would destroy the runs stored there."""
        name = str(self.query("SELECT current_database() AS db")[0]["db"])
        if is_pgdyno_name(name):
            raise UsageError(
                f"the results database at {self.label} is {name}, a database pgdyno drops and "
                "re-creates for its datasets, so the runs kept there would be lost: keep "
                "results in a database of another name."
            )

    def check_writable(self) -> None:
        """Refuse at once, before any run, a database this user could not store runs in."""
        checks = [f"has_table_privilege('{t}', 'INSERT')" for t in _INSERTED]
        checks += [f"has_table_privilege('{t}', 'UPDATE')" for t in _UPDATED]
        row = self.query(
            f"SELECT {' AND '.join(checks)} AS granted,"
            " current_setting('transaction_read_only') = 'on' AS read_only"
        )[0]
        if row["read_only"] or not row["granted"]:
            why = "is read-only" if row["read_only"] else "does not let this user write"
            raise StoreUnavailable(
                f"the results database at {self.label} {why}: grant INSERT and UPDATE on "
                "pgdyno's tables, or pass another --results database."
            )
