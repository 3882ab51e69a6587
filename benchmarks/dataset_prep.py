"""Dataset preparation: the naive way (pgbench -i, then CHECKPOINT, before each of 3 runs)
against pgdyno's way (pgbench -i once into a template, then a file copy before each run), on
one sandbox in one process. Both ways end with the data on disk before a run starts. Also
compares pgbench's client-side and server-side data generation, which decides pgdyno's
default init steps.

    python benchmarks/dataset_prep.py [--scale 20] [--rounds 2] [--storage]

Prints the ratio naive / pgdyno (target: >= 2x). Times are wall-clock on a shared machine:
read the ratio, not the seconds.

With --storage (root; issue 23) the sandbox's data directory is put on an ext4 and then an XFS
filesystem pgdyno builds on a loop image (as a storage set of a plan is), and on each the
per-run reset (a copy of the template: a plain copy on ext4, a reflink clone on XFS through
PostgreSQL 18's file_copy_method = clone) is timed against `pgbench -i` of the same scale and
a CHECKPOINT. Targets: >= 4x on ext4, >= 20x on XFS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from psycopg import sql
from throwaway import throwaway_sandbox

from pgdyno import process
from pgdyno.pgbench.command import INIT_STEPS, init_argv
from pgdyno.pgbench.dataset import Generator, drop_datasets, ensure_dataset, reset_bench_db
from pgdyno.postgres.client import Client, connect, with_dbname

RUNS = 3  # the figure; --runs changes it


def settle(client: Client) -> None:
    """Start each timed section from the same state: nothing left by the other side."""
    drop_datasets(client)
    client.execute(sql.SQL("DROP DATABASE IF EXISTS naive WITH (FORCE)"))
    client.execute(sql.SQL("CHECKPOINT"))


def naive(client: Client, pgbench: Path, scale: int, steps: str, runs: int) -> float:
    """What a shell script does: re-initialise the database before every run."""
    settle(client)
    started = time.perf_counter()
    for _ in range(runs):
        client.execute(sql.SQL("DROP DATABASE IF EXISTS naive WITH (FORCE)"))
        client.execute(sql.SQL("CREATE DATABASE naive"))
        argv = init_argv(pgbench, with_dbname(client.dsn, "naive"), scale, steps)
        process.run(argv, what="pgbench -i", timeout=None)
        # A careful script (pgbench-tools does this) checkpoints before each run, so the run
        # does not start with the fresh dataset's dirty pages still to be written.
        client.execute(sql.SQL("CHECKPOINT"))
    return time.perf_counter() - started


def templated(
    client: Client, pgbench: Path, scale: int, version_num: int, runs: int
) -> tuple[float, float]:
    """pgdyno: generate once into a template, copy it before each run.

    Returns the total and the part spent generating the template."""
    settle(client)
    started = time.perf_counter()
    dataset = ensure_dataset(client, scale, Generator(pgbench=pgbench))
    generated = time.perf_counter() - started
    for _ in range(runs):
        reset_bench_db(client, dataset.template, version_num)
    return time.perf_counter() - started, generated


def per_run_reset(client: Client, pgbench: Path, scale: int, runs: int) -> tuple[float, float]:
    """(pgbench -i + CHECKPOINT, one reset from the template), in seconds, medians of `runs`."""
    naive_s = [naive(client, pgbench, scale, INIT_STEPS, 1) for _ in range(runs)]
    settle(client)
    dataset = ensure_dataset(client, scale, Generator(pgbench=pgbench))
    version_num = client.server_info().version_num
    resets = []
    for _ in range(runs):
        started = time.perf_counter()
        reset_bench_db(client, dataset.template, version_num)
        resets.append(time.perf_counter() - started)
    return statistics.median(naive_s), statistics.median(resets)


def on_storage(scale: int, runs: int) -> None:
    """The per-run reset on ext4 (a copy) and XFS (a clone), each on a loop image."""
    from pgdyno.experiment.storage_sets import SetStorage
    from pgdyno.plan.model import StorageSpec

    with throwaway_sandbox("pgdyno-bench-storage-") as (workdir, binaries, box):
        storage = SetStorage(workdir, print, dataset_bytes=2 * scale * 15 << 20)
        try:
            for filesystem in ("ext4", "xfs"):
                box.stop()
                storage.arrange(box, filesystem, StorageSpec(filesystem=filesystem))
                box.start({}, owner_pid=os.getpid())
                with connect(box.conninfo()) as client:
                    slow, reset = per_run_reset(client, binaries.tool("pgbench"), scale, runs)
                print(f"dataset_prep --storage: {filesystem}, scale {scale}: pgbench -i + "
                      f"CHECKPOINT {slow:.2f} s, reset from the template {reset:.3f} s: "
                      f"{slow / reset:.1f}x (median of {runs})")  # fmt: skip
        finally:
            box.stop()
            storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved naive/pgdyno pairs")
    parser.add_argument("--runs", type=int, default=RUNS, help="runs the dataset is prepared for")
    parser.add_argument("--storage", action="store_true", help="on ext4 and XFS loop images")
    args = parser.parse_args()
    runs = args.runs
    if args.storage:
        on_storage(args.scale, runs)
        return
    with throwaway_sandbox("pgdyno-bench-") as (_workdir, binaries, box):
        pgbench = binaries.tool("pgbench")
        with connect(box.conninfo()) as client:
            version_num = client.server_info().version_num
            client_side = naive(client, pgbench, args.scale, "dtgvp", runs) / runs
            server_side = naive(client, pgbench, args.scale, "dtGvp", runs) / runs
            print(
                f"pgbench -i -s {args.scale}: client-side generation {client_side:.2f} s, "
                f"server-side {server_side:.2f} s (server-side is "
                f"{client_side / server_side:.2f}x as fast)"
            )
            writes, reads = [], []
            for round_no in range(1, args.rounds + 1):
                slow = naive(client, pgbench, args.scale, INIT_STEPS, runs)
                fast, generated = templated(client, pgbench, args.scale, version_num, runs)
                copy = (fast - generated) / runs
                writes.append(slow / fast)
                # Read-only runs leave the data as it was: one copy serves them all.
                reads.append(slow / (generated + copy))
                print(
                    f"round {round_no}: naive {runs}x pgbench -i {slow:.2f} s; pgdyno "
                    f"{fast:.2f} s (template {generated:.2f} s + {runs} copies of {copy:.2f} s); "
                    f"ratio {writes[-1]:.2f}x for writing runs, {reads[-1]:.2f}x for read-only"
                )
        print(
            f"dataset_prep: scale {args.scale}, {runs} runs: pgdyno prepares datasets "
            f"{statistics.median(writes):.2f}x as fast as the naive way for writing workloads "
            f"and {statistics.median(reads):.2f}x for read-only ones (median of {len(writes)} "
            "rounds; target >= 2x)"
        )


if __name__ == "__main__":
    main()
