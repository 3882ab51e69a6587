"""A bench or compare session's row in the results store: begun, and finished as done,
interrupted or failed however the block that runs it ends."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from pgdyno.errors import Interrupted
from pgdyno.experiment.context import RunContext
from pgdyno.host.machine import HostFacts

__all__ = ["finished_as", "recorded_session"]


@contextmanager
def finished_as(finish: Callable[[str], None]) -> Iterator[None]:
    """Call `finish` with done, interrupted or failed, by how the block ends."""
    status = "done"
    try:
        yield
    except (KeyboardInterrupt, Interrupted):
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        finish(status)


@contextmanager
def recorded_session(
    ctx: RunContext, command: list[str], target: str, host: HostFacts, server: Mapping[str, object]
) -> Iterator[int]:
    """A session row that ends as done, interrupted or failed however the block ends."""
    store = ctx.store
    session_id = store.begin_session(command, target, host.as_dict(), server)
    try:
        with finished_as(lambda status: store.finish_session(session_id, status)):
            yield session_id
    finally:
        if not ctx.keep_files:
            shutil.rmtree(ctx.run_root / f"session-{session_id}", ignore_errors=True)
