"""The disk under the work directory fills up while pgbench runs.

Before: the run's reason was pgbench's last stdout line (`tps = ...`), and "No space left on
device" was only in the server log. Now the reason names the disk and the directory and quotes
PostgreSQL, and the sweep stops there with one sentence (every later run would fail too).

A real tmpfs is the work directory (root only); once the first run is stored and the second is
running, a file fills it to 2 MB free and the test switches WAL segments until PostgreSQL needs
a new one (16 MB), which it cannot write: the second run fails then, however few transactions
pgbench manages on a busy machine (waiting for pgbench to fill 2 MB let the second run end "ok"
under load).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from conftest import (
    IS_ROOT,
    new_workdir,
    one_clear_sentence,
    pgdyno_process,
    remove_workdir,
    wait_for,
)
from pgdyno.postgres.cluster import all_sandboxes
from pgdyno.process import pid_alive, pid_cmdline

# pgdyno keeps 1 GiB free beyond the dataset (scale.DISK_RESERVE), so the disk must be larger.
TMPFS_SIZE = "1200m"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not IS_ROOT, reason="mounting a tmpfs needs root"),
]


@pytest.fixture
def small_disk() -> Iterator[Path]:
    path = new_workdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=755", "tmpfs", str(path)],
        check=True,
    )
    try:
        yield path
    finally:
        remove_workdir(path)  # stops the sandbox; rmtree empties the tmpfs
        path.mkdir(exist_ok=True)
        subprocess.run(["umount", str(path)], check=False)
        if subprocess.run(["mountpoint", "-q", str(path)], check=False).returncode == 0:
            subprocess.run(["umount", "-l", str(path)], check=False)
        path.rmdir()


def stored(results: Path) -> int:
    if not results.exists():
        return 0
    try:
        with sqlite3.connect(results, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM runs").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def measuring(workdir: Path) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = pid_cmdline(int(entry.name))
            if cmd and cmd[0].endswith("pgbench") and "-T" in cmd and str(workdir) in str(cmd):
                return True
    return False


def fill(disk: Path, leave: int) -> None:
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    subprocess.run(["fallocate", "-l", str(free - leave), str(disk / "filler")], check=True)


def need_a_new_wal_segment(workdir: Path) -> None:
    """Commit and switch WAL segments until the server needs a segment file it has not made
    (one may have been made ahead): on a full disk it cannot, and stops (PANIC)."""
    (box,) = all_sandboxes(workdir / "clusters", None)
    with contextlib.suppress(psycopg.Error), psycopg.connect(box.conninfo(), autocommit=True) as db:
        for _ in range(4):
            db.execute("SELECT txid_current()")  # a commit record: the switch is not a no-op
            db.execute("SELECT pg_switch_wal()")


def under(workdir: Path) -> list[int]:
    return [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and any(str(workdir) in part for part in pid_cmdline(int(e.name)))
    ]


def test_disk_full_mid_run_names_the_disk_and_stops_the_sweep(small_disk: Path, run_cli):
    results = small_disk / "results.sqlite"
    with pgdyno_process(
        "bench", "--pg-version", "18", "-w", "tpcb-like", "-s", "1", "-c", "4", "-T", "10",
        "--repeats", "3", "--workdir", str(small_disk),
    ) as bench:  # fmt: skip
        assert wait_for(lambda: stored(results) >= 1, timeout=240), "no run finished"
        assert wait_for(lambda: measuring(small_disk), timeout=60)
        fill(small_disk, leave=2 * 1024 * 1024)
        need_a_new_wal_segment(small_disk)
        _, stderr = bench.communicate(timeout=300)

    assert bench.returncode == 1, stderr
    sentence = one_clear_sentence(stderr)
    data = small_disk / "clusters" / "pg18" / "data"
    assert f"the disk under {data} (tmpfs {small_disk}, " in sentence
    # "could not write" (WAL: a PANIC) or "could not extend file" (a table): whichever came first
    assert "MiB free) filled up during the run: PostgreSQL could not " in sentence, sentence
    assert "No space left on device" in sentence and "use a larger --workdir" in sentence
    assert "tps =" not in stderr

    listed = run_cli(small_disk, "runs", "list", "--json")
    assert listed.code == 0, listed.stderr
    runs = sorted(json.loads(listed.stdout), key=lambda r: r["id"])
    assert [r["status"] for r in runs] == ["ok", "failed"]
    assert runs[0]["tps"] > 0
    assert runs[1]["error"].startswith(f"the disk under {data} (tmpfs {small_disk}, ")
    with sqlite3.connect(results) as db:
        assert db.execute("SELECT status FROM sessions").fetchall() == [("failed",)]
    assert wait_for(lambda: not [p for p in under(small_disk) if pid_alive(p)], timeout=30)
