"""Shared results (issue 22): importing 1,000 runs, and 4 processes writing into one PostgreSQL.

    python benchmarks/store_exchange.py [--runs 1000] [--writers 4] [--per-writer 50]

1. Import: a SQLite results database of `--runs` runs (report_render.py's copies of real
   recorded runs: per-second rows, OS and PostgreSQL samples, events, statements) is exported
   to one file, and the file is imported into a fresh SQLite file and into a PostgreSQL
   database (a throwaway sandbox), then imported again (which must add nothing). The baseline,
   measured in the same run, is the floor of any copy: reading every row of those runs from
   the source. Target: an import of 1,000 runs under 10 s.
2. Writers: `--writers` processes each store `--per-writer` runs into one PostgreSQL store at
   once (each creating the tables on first use, as pgdyno processes on many hosts would); the
   runs, ids and uids are counted (target: nothing lost). The baseline is one process storing
   as many runs alone.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from report_render import FIXTURE, make_database
from throwaway import throwaway_sandbox

from pgdyno.environment import ResultsLocation
from pgdyno.results.exchange import export_runs, import_runs
from pgdyno.results.open import open_results
from pgdyno.results.store import ResultsStore
from pgdyno.results.transfer import CHILDREN, selected_run_ids

TESTS = Path(__file__).parent.parent / "tests"


def timed(action):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def read_all(path: Path) -> int:
    """Every row of every run: what any copy must at least read."""
    rows = 0
    with ResultsStore(path, writing=False) as store:
        ids = selected_run_ids(store.db)
        rows += len(store.db.query("SELECT * FROM runs"))
        for table in CHILDREN:
            for start in range(0, len(ids), 20):
                some = ids[start : start + 20]
                marks = ", ".join("?" for _ in some)
                rows += len(store.db.query(f"SELECT * FROM {table} WHERE run_id IN ({marks})",
                                           tuple(some)))  # fmt: skip
    return rows


def new_database(admin: str, name: str) -> str:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return admin.replace("dbname=postgres", f"dbname={name}")


def import_arm(box_dsn: str, runs: int, scratch: Path) -> None:
    source = scratch / "source.sqlite"
    source.write_bytes(FIXTURE.read_bytes())
    make_database(source, runs)
    with ResultsStore(source) as store:  # gives the copies their uids
        ids = selected_run_ids(store.db)
        rows, read_s = timed(lambda: read_all(source))
        export = scratch / "all.pgdyno"
        copied, export_s = timed(lambda: export_runs(store.db, export, ids))
    print(f"{copied.runs} runs, {rows:,} rows; export file {export.stat().st_size / 1e6:.0f} MB")
    with ResultsStore(scratch / "fresh.sqlite") as target:
        into_sqlite, sqlite_s = timed(lambda: import_runs(target.db, export))
        again, again_s = timed(lambda: import_runs(target.db, export))
    pg = ResultsLocation.of(new_database(box_dsn, "imported"))
    with open_results(pg) as target:
        into_pg, pg_s = timed(lambda: import_runs(target.db, export))
    assert into_sqlite.runs == into_pg.runs == copied.runs and again.runs == 0
    print(f"store_exchange import: {into_sqlite.runs} runs into SQLite {sqlite_s:.1f} s, into "
          f"PostgreSQL {pg_s:.1f} s (target < 10 s); {sqlite_s / read_s:.1f}x and "
          f"{pg_s / read_s:.1f}x reading them alone ({read_s:.1f} s); export {export_s:.1f} s; "
          f"importing again {again_s:.1f} s, {again.already} already there, 0 added")  # fmt: skip


def writers_arm(box_dsn: str, writers: int, per_writer: int) -> None:
    writer = [sys.executable, str(TESTS / "store_runs.py")]  # one session of runs, then exits

    def run(dsn: str, count: int, n: int) -> float:
        start = time.perf_counter()
        procs = [subprocess.Popen([*writer, str(w), str(count), dsn]) for w in range(n)]
        if any(p.wait() != 0 for p in procs):
            sys.exit("a writer failed")
        return time.perf_counter() - start

    alone = run(new_database(box_dsn, "alone"), writers * per_writer, 1)
    shared = new_database(box_dsn, "shared")
    together = run(shared, per_writer, writers)
    with psycopg.connect(shared) as conn:
        counted = conn.execute(
            "SELECT count(*), count(DISTINCT id), count(DISTINCT uid) FROM runs"
        ).fetchone()
        sessions = conn.execute("SELECT count(*) FROM sessions WHERE status = 'done'").fetchone()
    want = writers * per_writer
    lost = want - (counted[0] if counted else 0)
    print(f"store_exchange writers: {writers} processes x {per_writer} runs at once: "
          f"{counted} (runs, distinct ids, distinct uids), {sessions[0] if sessions else 0} "
          f"sessions done, {lost} lost (target 0); {together:.1f} s, {together / alone:.2f}x "
          f"one process writing {want} runs alone ({alone:.1f} s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--per-writer", type=int, default=50)
    args = parser.parse_args()
    with (
        throwaway_sandbox("pgdyno-exchange-") as (_workdir, _binaries, box),
        tempfile.TemporaryDirectory(prefix="pgdyno-exchange-") as scratch,
    ):
        import_arm(box.conninfo(), args.runs, Path(scratch))
        writers_arm(box.conninfo(), args.writers, args.per_writer)


if __name__ == "__main__":
    main()
