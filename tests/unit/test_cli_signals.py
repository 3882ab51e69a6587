"""A SIGTERM that arrives while pgdyno says why it stopped (a supervisor repeating its request):
the sentence is written and the exit status kept. Before, the handler raised again inside the
error path and the second `Interrupted` escaped `main` (a traceback, then death by the signal:
tests/e2e/test_fleet.py's SIGTERM storm met it now and then)."""

from __future__ import annotations

import io
import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import make_env
from pgdyno.cli import _raise_interrupted, main
from pgdyno.errors import Interrupted, PgdynoError


class SignallingStream(io.StringIO):
    """stderr that sends this process SIGTERM at its first write: the error path's own."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = False

    def write(self, text: str) -> int:
        if not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
        return super().write(text)


def test_a_sigterm_while_the_error_is_written_keeps_the_sentence_and_the_status(
    workdir: Path, cache_dir: Path
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    stderr = SignallingStream()
    env = replace(make_env(workdir, cache_dir), stderr=stderr)
    code = main(["tune", "--sandbox", "--budget", "5m"], env)
    assert stderr.sent
    assert code == 2, stderr.getvalue()
    assert stderr.getvalue().startswith("pgdyno: error: --budget only acts with --verify")
    assert signal.getsignal(signal.SIGTERM) == before  # put back as it was


def test_a_stop_request_is_not_swallowed_by_an_error_handler() -> None:
    """SIGTERM lands wherever the main thread is; inside a block that handles pgdyno's errors
    (a plan check, a probe) it passed for one of them and the command went on to its end, so a
    stop sent once (`fleet run` sends one to each host) was lost."""

    def checking() -> str:
        try:
            _raise_interrupted(signal.SIGTERM, None)
        except (PgdynoError, Exception):
            return "swallowed"
        return "went on"

    with pytest.raises(Interrupted, match="received SIGTERM"):
        checking()
