"""SIGKILL of pgdyno mid-compare while a set holds transparent huge pages changed: the kill
leaves THP changed, `compare` refuses to start over it, and `pgdyno rollback` puts it back.

pgdyno runs as a real process (`.venv/bin/pgdyno`), killed with SIGKILL after a run is stored
while the set that changes THP is applied (tests/faults/test_sigkill.py does the same with a
sysctl).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, one_clear_sentence, postmaster_running, wait_for

PGDYNO = Path(sys.executable).parent / "pgdyno"
ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")

pytestmark = [
    pytest.mark.skipif(not IS_ROOT, reason="host settings are changed as root only"),
    pytest.mark.skipif(not ENABLED.is_file(), reason="this kernel has no THP"),
    pytest.mark.skipif(not os.access(ENABLED, os.W_OK), reason="/sys is read-only here"),
]


def active() -> str:
    """The active word of THP `enabled`, read without pgdyno."""
    match = re.search(r"\[(.+?)\]", ENABLED.read_text())
    assert match is not None
    return match.group(1)


def stored_runs(results: Path) -> int:
    """Runs the file holds, read without pgdyno (which would mark sessions)."""
    if not results.exists():
        return 0
    try:
        with sqlite3.connect(results, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def set_settings(results: Path, name: str) -> tuple[object, object]:
    """A set's requested and effective settings as stored (None until recorded)."""
    if not results.exists():
        return None, None
    try:
        with sqlite3.connect(results, timeout=5) as db:
            row = db.execute(
                "SELECT requested, effective FROM comparison_sets WHERE name = ?", (name,)
            ).fetchone()
    except sqlite3.OperationalError:
        return None, None
    if row is None:
        return None, None
    return json.loads(row[0]), json.loads(row[1]) if row[1] else None


@pytest.fixture
def enabled_restored() -> Iterator[str]:
    """THP `enabled` as it was, put back whatever the test does."""
    original = active()
    try:
        yield original
    finally:
        if active() != original:
            ENABLED.write_text(original + "\n")
        assert active() == original


def test_sigkill_mid_compare_with_thp_then_rollback(workdir: Path, run_cli, enabled_restored: str):
    original = enabled_restored
    changed = "never" if original != "never" else "madvise"
    plan = workdir / "thp.toml"
    plan.write_text(
        'name = "kill-mid-thp"\n'
        "[matrix]\n"
        'workloads = ["select-only"]\nscales = [1]\nclients = [1]\n'
        "duration = 2\nrepeats = 2\nwarmup = 0\n"
        '[[set]]\nname = "base"\n'
        f'[[set]]\nname = "thp-off"\n[set.thp]\nenabled = "{changed}"\n'
    )
    results = workdir / "results.sqlite"
    child = subprocess.Popen(
        [str(PGDYNO), "compare", str(plan), "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # Killed while set "thp-off" holds the kernel setting, after the first run is stored
        # and the set's settings in effect are.
        moment = wait_for(
            lambda: (
                stored_runs(results) >= 1
                and active() == changed
                and set_settings(results, "thp-off")[1] is not None
            ),
            timeout=300,
        )
        assert moment, "the moment to kill never came"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert active() == changed  # the kill left the host changed
    requested, effective = set_settings(results, "thp-off")
    assert isinstance(requested, dict) and isinstance(effective, dict)
    assert requested["host"] == effective["host"] == {"transparent_hugepage/enabled": changed}
    journal = [
        json.loads(line)
        for line in (workdir / "host-journal.jsonl").read_text().split("\n")
        if line
    ]
    assert [(r["kind"], r["name"], r["old"], r["new"]) for r in journal] == [
        ("thp", "enabled", original, changed)
    ]

    refused = run_cli(workdir, "compare", str(plan))
    assert refused.code == 2
    assert (
        "holds 1 change not restored (left by an interrupted run or by `pgdyno tune --apply`): "
        "run `pgdyno rollback` first" in (one_clear_sentence(refused.stderr))
    )
    assert active() == changed

    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert f"restored transparent_hugepage/enabled to {original} (pgdyno had set {changed})" in (
        restored.stdout
    )
    assert active() == original
    again = run_cli(workdir, "rollback")
    assert again.code == 0 and "nothing to restore" in again.stdout
    # The killed command's sandbox is stopped by its watchdog: nothing is left running.
    assert wait_for(lambda: not postmaster_running(workdir), timeout=90)
