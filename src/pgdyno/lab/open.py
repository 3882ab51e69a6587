"""One lab for every command that measures: the results store, the progress display and the
run context every run of the command shares, opened and closed together."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace

from pgdyno.environment import Environment
from pgdyno.experiment.context import ProgressReporter, RemoteTarget, RunContext
from pgdyno.postgres.server_lock import ServerLock
from pgdyno.results.open import open_results

type Progress = Callable[[], AbstractContextManager[ProgressReporter]]


@contextmanager
def open_lab(
    env: Environment,
    *,
    log: Callable[[str], None],
    progress: Progress,
    keep_files: bool,
    remote: RemoteTarget | None = None,
    lock: ServerLock | None = None,
) -> Iterator[RunContext]:
    """The run context of a command run in `env`: its results store and progress display open
    for the block; over SSH (`remote`) the remote host's /proc and /sys are read; `lock` is an
    existing server's benchmark lock, held by the caller for the block."""
    with open_results(env.results) as store, progress() as shown:
        ctx = RunContext.of(env, store, log=log, progress=shown, keep_files=keep_files)
        if remote is not None:
            ctx = replace(ctx, proc_root=remote.host.proc_root, sys_root=remote.host.sys_root,
                          remote=remote)  # fmt: skip
        yield replace(ctx, server_lock=lock)
