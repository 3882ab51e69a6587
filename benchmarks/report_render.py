"""Report rendering: a comparison of 100 runs to one HTML file, against reading those runs.

    python benchmarks/report_render.py [--runs 100] [--rounds 3] [--hosts N]

The runs are the recorded real runs of tests/data/report/results.sqlite, copied (with their
per-second rows, OS and PostgreSQL samples, checkpoint events and statements) into one
comparison of 4 sets x 5 client counts x 5 repeats, so the page holds 5 cells of 4 sets,
100 drill-downs and every chart kind. The baseline is the floor any report pays: loading the same
runs from the results database. Prints the median time of each over the rounds, their ratio,
the file size and the peak Python memory of a render (targets: under 3 s and under 10 MB).

With `--hosts N` (issue 22) the runs are spread over N bench sessions of N hosts (hostname,
machine id and kernel of their own) and the report is `report --all --by host`: seed 000's
comparison across hosts (target for 1,000 runs from 5 hosts: under 3 s and under 20 MB).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from pgdyno.report import content, html
from pgdyno.report.load import Selection, load
from pgdyno.results.store import ResultsStore

FIXTURE = Path(__file__).parent.parent / "tests" / "data" / "report" / "results.sqlite"
SETS = ("baseline", "set-b", "set-c", "set-d")
CLIENTS = (1, 2, 4, 8, 16)


def _copy_rows(conn: sqlite3.Connection, table: str, source: int, target: int) -> None:
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != "run_id"]
    listed = ", ".join(columns)
    conn.execute(
        f"INSERT INTO {table} (run_id, {listed}) SELECT ?, {listed} FROM {table} WHERE run_id = ?",
        (target, source),
    )


def _host_sessions(conn: sqlite3.Connection, hosts: int) -> list[int]:
    """`hosts` bench sessions, each on a host of its own."""
    ids = []
    for n in range(hosts):
        host = {"hostname": f"db-{n + 1}", "machine_id": f"{n + 1:032x}", "kernel": f"6.{n}.0",
                "cpu_model": "bench", "cpu_count": 2, "memory_bytes": 8 << 30}  # fmt: skip
        cur = conn.execute(
            "INSERT INTO sessions (started_at, status, hostname, pid, command, target, host,"
            " server) VALUES (?, 'done', ?, 1, '[]', 'sandbox pg18', ?, '{}')",
            (f"2026-11-21T00:00:0{n}+00:00", host["hostname"], json.dumps(host)),
        )
        ids.append(int(cur.lastrowid or 0))
    return ids


def make_database(path: Path, runs: int, hosts: int = 1) -> int:
    """A comparison of `runs` runs copied from the fixture's (with `hosts` > 1: spread over
    that many hosts' sessions); returns its id."""
    with ResultsStore(path):
        pass  # migrate the copy to the current schema first
    conn = sqlite3.connect(path)
    sources = [r[0] for r in conn.execute("SELECT id FROM runs WHERE comparison_id = 1")]
    cur = conn.execute(
        "INSERT INTO comparisons (name, plan_path, plan_digest, plan_text, mode, baseline, scales,"
        " status, started_at) VALUES ('bench-100', 'bench.toml', 'x', '', 'sets', 'baseline',"
        " '[1]', 'done', '2026-11-21T00:00:00+00:00')"
    )
    comparison = int(cur.lastrowid or 0)
    for position, name in enumerate(SETS):
        conn.execute(
            "INSERT INTO comparison_sets (comparison_id, position, name, requested) VALUES"
            " (?, ?, ?, ?)",
            (comparison, position, name, json.dumps({"pg": {"work_mem": f"{4 << position}MB"}})),
        )
    # uid: each copy is a run of its own; the store gives it its uid when next opened.
    columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)") if r[1] not in ("id", "uid")]
    sessions = _host_sessions(conn, hosts) if hosts > 1 else []
    for i in range(runs):
        source = sources[i % len(sources)]
        set_name = SETS[i % len(SETS)]
        clients = CLIENTS[(i // len(SETS)) % len(CLIENTS)]
        repeat = i // (len(SETS) * len(CLIENTS)) + 1
        cur = conn.execute(
            f"INSERT INTO runs ({', '.join(columns)}) SELECT {', '.join(columns)} FROM runs"
            " WHERE id = ?",
            (source,),
        )
        run_id = int(cur.lastrowid or 0)
        conn.execute(
            "UPDATE runs SET comparison_id = ?, set_name = ?, clients = ?, repeat = ?,"
            " tps = tps * ? WHERE id = ?",
            (comparison, set_name, clients, repeat, 1 + 0.01 * (i % 7), run_id),
        )
        if sessions:
            conn.execute("UPDATE runs SET session_id = ? WHERE id = ?",
                         (sessions[i % hosts], run_id))  # fmt: skip
        for table in ("run_seconds", "run_samples", "run_events", "run_statements"):
            _copy_rows(conn, table, source, run_id)
    conn.commit()
    conn.close()
    return comparison


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=1)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-report-bench-"))
    try:
        db = workdir / "results.sqlite"
        shutil.copy(FIXTURE, db)
        comparison = make_database(db, args.runs, args.hosts)
        conn = sqlite3.connect(db)
        query = "SELECT id FROM runs WHERE comparison_id = ? ORDER BY id"
        copies = tuple(r[0] for r in conn.execute(query, (comparison,)))
        conn.close()
        selection = (
            Selection(run_ids=copies, by="host")
            if args.hosts > 1
            else Selection(comparison_id=comparison)
        )
        html.plotly_js()  # read the bundle once, as any later report in the process would
        loads, renders = [], []
        page = ""
        for _ in range(args.rounds):
            start = time.perf_counter()
            with ResultsStore(db) as store:
                data = load(store, selection)
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            with ResultsStore(db) as store:
                data = load(store, selection)
            report = content.build(data, "2026-11-21T00:00:00+00:00", "bench")
            sets = data.comparison.sets if data.comparison else ()
            page = html.render(report, {s.name: s for s in sets})
            (workdir / "report.html").write_text(page, encoding="utf-8")
            renders.append(time.perf_counter() - start)
        tracemalloc.start()
        with ResultsStore(db) as store:
            data = load(store, selection)
        html.render(content.build(data, "t", "bench"), {})
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        size = (workdir / "report.html").stat().st_size
        load_s, render_s = statistics.median(loads), statistics.median(renders)
        print(f"{len(data.runs)} runs, {len(report['cells'])} cells, "
              f"{sum(len(r["charts"]) for r in report["runs"])} drill-down charts")  # fmt: skip
        size_target = 20 if args.hosts > 1 else 10
        print(f"report_render: {render_s:.2f} s for the whole report (target < 3 s), "
              f"{render_s / load_s:.1f}x loading the runs alone ({load_s:.2f} s); "
              f"file {size / 1e6:.1f} MB (target < {size_target} MB, plotly.js "
              f"{len(html.plotly_js()) / 1e6:.1f} MB of it); peak Python memory "
              f"{peak / 1e6:.0f} MB (median of {args.rounds} rounds)")  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
