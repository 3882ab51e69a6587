"""Holding off SIGINT and SIGTERM while a host setting is half changed or half restored.

A second Ctrl-C must not cut a change short between its journal record and its write, or a
restore between its write and its "restored" record: the signals are deferred and delivered
right after the block.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_Handler = Callable[[int, FrameType | None], Any] | int
_holding = False


@contextmanager
def signals_held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM until the block ends, then deliver them to the handlers in
    place before (which raise KeyboardInterrupt or Interrupted as usual). Handlers can only be
    set from the main thread; elsewhere, and when nested, this does nothing."""
    global _holding
    if _holding or threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        caught.append(signum)

    previous: dict[signal.Signals, _Handler] = {}
    _holding = True
    try:
        for number in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(number)
            if handler is None:
                continue  # set outside Python: it could not be put back
            previous[number] = handler
            signal.signal(number, hold)
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _holding = False
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)
