"""SIGKILL of `pgdyno tune --sandbox --apply --yes` in the middle: the killed command's sandbox is
stopped by its watchdog, and `pgdyno rollback` puts every host and server setting back exactly.

pgdyno runs as a real process (`.venv/bin/pgdyno`), killed as soon as the PostgreSQL journal holds
a change record (the host journal then holds the host changes, made first). Host values are read
and guarded with tests/e2e/test_tune.py's plain-file helpers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, make_env, postmaster_running, wait_for
from e2e.test_tune import differences, host_state, pg_state, seeded_host
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries

PGDYNO = Path(sys.executable).parent / "pgdyno"
SANDBOX = ("--sandbox", "--pg-version", "18")

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="host settings are changed as root only")


@pytest.fixture
def host_guard(workdir: Path) -> Iterator[dict[str, str]]:
    with seeded_host(workdir) as before:
        yield before


def changes(journal: Path) -> list[dict[str, object]]:
    """The journal's change records, read without pgdyno; a torn last line is skipped."""
    try:
        lines = journal.read_text().splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        # The owner marker (pgdyno.changed_by) is the first change: wait for a setting.
        if record.get("op") == "change" and record.get("name") != "pgdyno.changed_by":
            records.append(record)
    return records


def test_sigkill_mid_apply_then_rollback_restores_everything(
    run_cli, workdir: Path, cache_dir: Path, binaries: Binaries, host_guard: dict[str, str]
) -> None:
    before_host = host_guard
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    box.start({}, owner_pid=None)
    try:
        before_pg = pg_state(box)
    finally:
        box.stop()

    pg_journal = workdir / "pg-journal.jsonl"
    child = subprocess.Popen(
        [str(PGDYNO), "tune", *SANDBOX, "--apply", "--yes", "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not changes(pg_journal) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert child.poll() is None, "tune --apply finished before the moment to kill it"
        assert changes(pg_journal), "the PostgreSQL journal never got a change"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    host_changes = changes(workdir / "host-journal.jsonl")
    assert host_changes, "the host settings are changed (and journalled) before PostgreSQL's"
    assert host_state(workdir) != before_host  # the kill left the host changed

    # The killed command started the sandbox: its watchdog stops it, nothing else needed.
    assert wait_for(lambda: not postmaster_running(workdir), timeout=90)

    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert "restored sysctl vm.swappiness to 60 (pgdyno had set 1)" in restored.stdout
    assert " on sandbox pg18 to " in restored.stdout  # PostgreSQL settings put back too
    assert host_state(workdir) == before_host
    assert not postmaster_running(workdir)  # rollback stops the sandbox it started

    box.start({}, owner_pid=None)
    try:
        assert differences(pg_state(box), before_pg) == {}
    finally:
        box.stop()

    again = run_cli(workdir, "rollback")
    assert again.code == 0 and "nothing to restore" in again.stdout
    assert host_state(workdir) == before_host
