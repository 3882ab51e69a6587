"""Record the report tests' results database from real runs (not run by the test suite).

    .venv/bin/python tests/data/report/record.py

Runs `pgdyno compare` on sets.toml (two sets, two client counts, checkpoints inside the runs)
and ladder.toml (a three-step ladder) in a throwaway work directory on the embedded
PostgreSQL 18, then writes the compacted database to tests/data/report/results.sqlite.
About two minutes on a 2-core machine.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-fixture-", dir="/tmp"))
    workdir.chmod(0o755)
    try:
        for plan in ("sets.toml", "ladder.toml"):
            subprocess.run(
                [sys.executable, "-m", "pgdyno", "compare", str(HERE / plan),
                 "--workdir", str(workdir)],
                check=True,
            )  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "pgdyno", "sandbox", "stop", "--workdir", str(workdir)],
            check=False,
        )
        target = HERE / "results.sqlite"
        target.unlink(missing_ok=True)
        with sqlite3.connect(workdir / "results.sqlite") as conn:
            conn.execute("VACUUM INTO ?", (str(target),))
        print(f"wrote {target} ({target.stat().st_size // 1024} KiB)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
