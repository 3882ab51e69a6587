"""Waiting on pgbench: pgdyno sleeps until the next tick or pgbench's exit, whichever is first,
so it wakes once a second while pgbench runs and notices the exit at once."""

from __future__ import annotations

from pathlib import Path

from pgdyno import process
from pgdyno.pgbench.execute import _exit_waiter


def test_the_wait_ends_at_the_childs_exit_not_at_the_tick(tmp_path: Path):
    with (
        (tmp_path / "out").open("w") as out,
        process.Child(["true"], stdout=out, stderr=out) as child,
    ):
        with _exit_waiter(child.pid) as wait_exit:
            woken_by = wait_exit(60)  # a pidfd poll: the exit event, not the end of the 60 s
            again = wait_exit(60)  # an exited child stays readable until it is reaped
        assert child.wait() == 0
    assert woken_by and again


def test_the_wait_sleeps_its_tick_while_the_child_runs(tmp_path: Path):
    with (
        (tmp_path / "out").open("w") as out,
        process.Child(["sleep", "60"], stdout=out, stderr=out) as child,
    ):
        with _exit_waiter(child.pid) as wait_exit:
            woken_by = wait_exit(0.05)
        assert child.poll() is None
    assert not woken_by  # the time ran out: no event
