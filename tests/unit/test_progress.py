"""The bench progress display: drawn on a terminal only, and redrawn once a second there, so
that it takes next to nothing from the machine being measured (benchmarks/harness_cost.py)."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from pgdyno.cli.progress import REFRESH_PER_S, MatrixProgress


def refresh_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if type(t).__name__ == "_RefreshThread"]


def test_on_a_terminal_the_bar_is_redrawn_once_a_second():
    console = Console(file=io.StringIO(), force_terminal=True, _environ={"TERM": "xterm"})
    with MatrixProgress(console) as progress:
        assert progress.live
        (thread,) = refresh_threads()
        assert thread.refresh_per_second == REFRESH_PER_S == 1  # type: ignore[attr-defined]
    thread.join(timeout=10)
    assert not thread.is_alive()  # stopped with the display


def test_elsewhere_nothing_is_redrawn_at_all():
    for console in (
        Console(file=io.StringIO(), force_terminal=False),  # a pipe, a file, CI
        Console(file=io.StringIO(), force_terminal=True, _environ={"TERM": "dumb"}),
    ):
        with MatrixProgress(console) as progress:
            assert not progress.live
            assert refresh_threads() == []
