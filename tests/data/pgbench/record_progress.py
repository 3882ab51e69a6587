"""Record pgbench's `-P 1` progress output (stderr) for one PostgreSQL major version.

    .venv/bin/python tests/data/pgbench/record_progress.py N

Uses pgdyno's own sandbox in a throwaway work directory; writes tests/data/pgbench/pgN/
progress*.stderr (see README.md in this directory).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pgdyno.environment import Environment, default_cache_dir
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import resolve
from pgdyno.postgres.client import connect

major = int(sys.argv[1])
out = Path(__file__).parent / f"pg{major}"
workdir = Path(tempfile.mkdtemp(prefix="pgdyno-rec-", dir="/tmp"))
workdir.chmod(0o755)
cache = default_cache_dir(os.environ, os.geteuid() == 0)
env = Environment(workdir, cache, workdir / "r.sqlite", dict(os.environ), is_root=os.geteuid() == 0)
binaries = resolve(None, major, cache)
box = open_sandbox(env, binaries, print)
box.start({}, owner_pid=None)
try:
    pgbench = str(binaries.tool("pgbench"))
    dsn = box.conninfo()
    subprocess.run([pgbench, "-i", "-s", "2", "-q", dsn], check=True, capture_output=True)
    with connect(dsn):
        pass
    runs = {
        "progress": ["-c", "2", "-j", "2", "-T", "4", "-P", "1"],
        "progress_rate": [
            "-b",
            "select-only",
            "-c",
            "2",
            "-T",
            "4",
            "-P",
            "1",
            "-R",
            "300",
            "-L",
            "1",
        ],
    }
    for name, args in runs.items():
        proc = subprocess.run([pgbench, "-n", *args, dsn], capture_output=True, text=True)
        (out / f"{name}.stderr").write_text(proc.stderr)
        (out / f"{name}.stdout").write_text(proc.stdout)
finally:
    box.stop()
    shutil.rmtree(workdir, ignore_errors=True)
