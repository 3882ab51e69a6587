"""A work directory that cannot be used: one sentence naming it and what to do, exit 3.

Root ignores file modes, so "read-only" is a real read-only filesystem: a small tmpfs mounted
and remounted read-only (unmounted afterwards), or a directory under /proc.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import one_clear_sentence

IS_ROOT = os.geteuid() == 0
AA_PLAN = Path(__file__).parents[2] / "examples" / "aa.toml"
needs_root = pytest.mark.skipif(not IS_ROOT, reason="mounting a tmpfs needs root")


@contextmanager
def readonly_tmpfs(path: Path) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@needs_root
@pytest.mark.parametrize(
    "command",
    [("bench", "-w", "select-only", "-T", "1"), ("sandbox", "start"), ("compare", str(AA_PLAN))],
)
def test_read_only_work_directory(workdir: Path, run_cli, command: tuple[str, ...]):
    with readonly_tmpfs(workdir / "ro") as ro:
        result = run_cli(workdir, *command, "--workdir", str(ro))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the work directory {ro} cannot be used (Read-only file system" in line
    assert "make it writable or choose another --workdir" in line


@needs_root
def test_read_only_work_directory_with_an_existing_server(box, run_cli):
    """`bench --dsn` takes no sandbox lock, yet its run files live in the work directory: the
    same sentence before any run, not a failure of every run."""
    with readonly_tmpfs(box.root.parent.parent / "ro") as ro:
        result = run_cli(ro, "bench", "--dsn", box.conninfo(), "-T", "1", "--workdir", str(ro))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the work directory {ro} cannot be used (Read-only file system" in line


@needs_root
def test_work_directory_to_be_made_under_a_read_only_one(workdir: Path, run_cli):
    with readonly_tmpfs(workdir / "ro") as ro:
        result = run_cli(workdir, "sandbox", "start", "--workdir", str(ro / "lab"))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the work directory {ro / 'lab'} cannot be used (Read-only file system" in line


@needs_root
def test_read_only_directory_inside_the_work_directory(workdir: Path, run_cli):
    """Not the lock file but a subdirectory (the clusters) fails: the same one sentence."""
    with readonly_tmpfs(workdir / "clusters"):
        result = run_cli(workdir, "sandbox", "start")
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the work directory {workdir} cannot be used (Read-only file system: " in line
    assert f"{workdir / 'clusters'}" in line


def test_work_directory_in_proc(workdir: Path, run_cli):
    result = run_cli(workdir, "bench", "-T", "1", "--workdir", "/proc/self")
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert "the work directory /proc/" in line and "choose another --workdir" in line


def test_a_file_where_the_work_directory_should_be(workdir: Path, run_cli):
    blocker = workdir / "file"
    blocker.write_text("not a directory\n")
    result = run_cli(workdir, "sandbox", "start", "--workdir", str(blocker / "lab"))
    line = one_clear_sentence(result.stderr)
    assert result.code == 3
    assert f"the work directory {blocker / 'lab'} cannot be used" in line
    assert blocker.read_text() == "not a directory\n"


def test_lock_holder_that_has_not_written_its_pid_yet_is_named(workdir: Path, run_cli):
    """The window between taking the lock and writing the pid, held open by a real process;
    the file still names an earlier holder that was killed."""
    (workdir / "pgdyno.lock").write_text("999999")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys, time\n"
         f"f = open({str(workdir / 'pgdyno.lock')!r}, 'a+')\n"
         "fcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        result = run_cli(workdir, "sandbox", "start")
    finally:
        holder.kill()
        holder.wait()
    line = one_clear_sentence(result.stderr)
    assert result.code == 1
    assert f"another pgdyno command (pid {holder.pid}) is using {workdir}: wait for it" in line
    assert not (workdir / "clusters").exists()  # the loser touched nothing


def test_two_commands_started_at_the_same_instant(workdir: Path, run_cli):
    """Several tries: exactly one wins; the other names the winner's pid in one sentence."""
    for attempt in range(3):
        lab = workdir / f"lab{attempt}"
        argv = [sys.executable, "-m", "pgdyno", "sandbox", "start", "--workdir", str(lab)]
        pair = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        try:
            outputs = [p.communicate(timeout=300) for p in pair]
        finally:
            run_cli(workdir, "sandbox", "stop", "--workdir", str(lab))
        codes = [p.returncode for p in pair]
        assert sorted(codes) == [0, 1], (codes, outputs)
        winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
        line = one_clear_sentence(outputs[loser][1])
        assert f"another pgdyno command (pid {pair[winner].pid}) is using {lab}: " in line
