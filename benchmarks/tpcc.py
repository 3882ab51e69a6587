"""The TPC-C-like workload: NOPM under pgdyno against bare pgbench running the same scripts, and
the loader's throughput against `pgbench -i` at a similar size, in one run.

    python benchmarks/tpcc.py [--rounds 6] [--seconds 20] [--warehouses 2] [--clients N]

One throwaway PostgreSQL 18 sandbox. The loader arm times `pgdyno bench`'s TPC-C-like template
load (server-side generation, parallel sessions) and `pgbench -i` of the pgbench scale whose
tables are about as large, each into a fresh database, and divides the MB of table data each wrote
by its seconds (target: TPC-C loader MB/s / pgbench -i MB/s >= 1.0). The NOPM arm alternates
`pgdyno bench -w tpcc` (default collection) with the exact pgbench command pgdyno ran, run bare
on a fresh copy of the same template with `sum(d_next_o_id)` read before and after; NOPM is
the increase per minute in both. The ratio pgdyno/bare is summarised as the geometric mean of
the per-round ratios with its 95% interval (target >= 0.99).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ratios import summarise
from throwaway import throwaway_sandbox

from pgdyno.pgbench.dataset import reset_bench_db, template_name
from pgdyno.postgres.client import Client, compose, connect, identifier
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.records.tpcc import TpccOptions
from pgdyno.tpcc.counters import new_orders
from pgdyno.tpcc.load import load
from pgdyno.tpcc.scripts import write_scripts

MIB = 1024**2
TABLE_BYTES = (
    "SELECT sum(pg_table_size(c.oid)) FROM pg_class c"
    " WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace"
)


def pgdyno_bench(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "pgdyno", "bench", "--workdir", str(workdir), "--pg-version", "18",
        "-w", "tpcc", "-s", str(args.warehouses), "-c", str(args.clients),
        "-T", str(args.seconds), "--json",
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    run: dict[str, Any] = json.loads(out)[0]
    return run


def bare_command(argv: list[str], scripts: Path) -> list[str]:
    """pgdyno's pgbench command without its transaction log, its scripts (removed when pgdyno
    ended) rendered again into `scripts`."""
    written = {path.name: path for _, _, path in write_scripts(scripts, TpccOptions())}
    bare = []
    for arg in argv:
        if arg == "-l" or arg.startswith(("--log-prefix=", "--sampling-rate=")):
            continue
        name, at, weight = arg.rpartition("@")
        if at and Path(name).name in written:
            arg = f"{written[Path(name).name]}@{weight}"
        bare.append(arg)
    return bare


def bare_nopm(box: Sandbox, argv: list[str], warehouses: int, seconds: int) -> float:
    """The same pgbench command, without pgdyno, on a fresh copy of the template."""
    with connect(box.conninfo("postgres")) as client:
        reset_bench_db(client, template_name(warehouses, "tpcc"), client.server_version_num)
    with connect(box.conninfo(BENCH_DB)) as bench:
        before = new_orders(bench)
    subprocess.run(argv, capture_output=True, text=True, check=True)
    with connect(box.conninfo(BENCH_DB)) as bench:
        return (new_orders(bench) - before) / (seconds / 60.0)


def fresh_database(client: Client, name: str) -> None:
    client.execute(compose("DROP DATABASE IF EXISTS {} WITH (FORCE)", identifier(name)))
    client.execute(compose("CREATE DATABASE {}", identifier(name)))


def loader_arm(box: Sandbox, pgbench: Path, warehouses: int) -> float:
    """TPC-C-like loader MB/s over pgbench -i MB/s, at about the same table size."""
    with connect(box.conninfo("postgres")) as client:
        fresh_database(client, "tpcc_load_bench")
        loaded = load(box.conninfo("tpcc_load_bench"), None, warehouses,
                      sessions=min(warehouses, len(os.sched_getaffinity(0))))  # fmt: skip
        tpcc_rate = loaded.table_bytes / MIB / loaded.seconds
        # pgbench: about 13 MiB of tables per scale unit (pgbench_accounts dominates).
        scale = max(1, round(loaded.table_bytes / (13 * MIB)))
        fresh_database(client, "pgbench_load_bench")
        started = time.monotonic()
        subprocess.run(
            [str(pgbench), "-i", "-s", str(scale), "-I", "dtgvp", "-q",
             box.conninfo("pgbench_load_bench")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        seconds = time.monotonic() - started
        with connect(box.conninfo("pgbench_load_bench")) as loaded_db:
            table_bytes = int(loaded_db.rows(TABLE_BYTES)[0][0])
        pgbench_rate = table_bytes / MIB / seconds
        for name in ("tpcc_load_bench", "pgbench_load_bench"):
            client.execute(compose("DROP DATABASE {} WITH (FORCE)", identifier(name)))
    print(f"loader: TPC-C-like {warehouses} warehouses, {loaded.table_bytes / MIB:,.0f} MiB of "
          f"tables in {loaded.seconds:.1f} s ({tpcc_rate:.1f} MiB/s); pgbench -i -s {scale}, "
          f"{table_bytes / MIB:,.0f} MiB in {seconds:.1f} s "
          f"({pgbench_rate:.1f} MiB/s)")  # fmt: skip
    return tpcc_rate / pgbench_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--warehouses", type=int, default=2)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    with throwaway_sandbox("pgdyno-tpcc-") as (workdir, binaries, box):
        loader = loader_arm(box, binaries.tool("pgbench"), args.warehouses)
        # A first run makes the template and gives the command the bare arm runs.
        command = bare_command(list(pgdyno_bench(workdir, args)["pgbench_argv"]),
                               workdir / "bare-scripts")  # fmt: skip
        ratios = []
        for i in range(args.rounds):  # the arms alternate which one runs first
            arms = {
                "pgdyno": lambda: float(pgdyno_bench(workdir, args)["tpcc"]["nopm"]),
                "bare": lambda: bare_nopm(box, command, args.warehouses, args.seconds),
            }
            order = ("pgdyno", "bare") if i % 2 == 0 else ("bare", "pgdyno")
            nopm = {name: arms[name]() for name in order}
            ratios.append(nopm["pgdyno"] / nopm["bare"])
            print(f"  round {i + 1} ({', '.join(order)}): pgdyno {nopm['pgdyno']:,.0f} NOPM, "
                  f"bare pgbench {nopm['bare']:,.0f} NOPM")  # fmt: skip
        print(f"tpcc: loader MB/s ratio TPC-C-like/pgbench -i {loader:.2f} (target >= 1.0)")
        print(f"tpcc: NOPM pgdyno/bare {summarise(ratios)} (target >= 0.99; {args.rounds} rounds, "
              f"{args.warehouses} warehouses, {args.clients} clients, "
              f"{args.seconds} s)")  # fmt: skip


if __name__ == "__main__":
    main()
