"""Command line: `main(args, env)` runs one command in-process and returns an exit status."""

from __future__ import annotations

import re
import signal
import sys
import traceback
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from types import FrameType

import click

from pgdyno.cli.app import cli
from pgdyno.environment import Environment
from pgdyno.errors import ExitStatus, Interrupted, PgdynoError
from pgdyno.textsafe import safe_text, shorten_words


def _usage_message(exc: click.UsageError) -> str:
    command = exc.ctx.command_path if exc.ctx else "pgdyno"
    message = exc.format_message().rstrip(".")
    message = message[:1].lower() + message[1:]
    return f"{message}; run '{command} --help' to see what it takes."


# What a supervisor or a user sends to stop pgdyno, and sends again when it takes its time.
_STOPS = (signal.SIGINT, signal.SIGTERM)


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(f"pgdyno received {signal.Signals(signum).name} and stopped.")


def main(args: Sequence[str], env: Environment) -> int:
    """Run the CLI; every failure becomes one sentence on stderr and a non-zero status."""
    # Read before parsing: the option works before the command (documented) and after it.
    show_traceback = "--traceback" in args
    previous = {sig: signal.getsignal(sig) for sig in _STOPS}
    handler_set = False
    try:
        signal.signal(signal.SIGTERM, _raise_interrupted)
        handler_set = True
    except ValueError:  # not the main thread (embedded use): leave signals alone
        pass
    try:
        return _run(args, env, show_traceback, handler_set)
    finally:
        if handler_set:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _settled(handler_set: bool) -> None:
    """The command has ended and its exit status is decided: a repeated SIGTERM or Ctrl-C must
    not interrupt the one sentence that says why (before, one landing there escaped as a
    traceback, and the process then died by the signal)."""
    if handler_set:
        for sig in _STOPS:
            signal.signal(sig, signal.SIG_IGN)


def _run(args: Sequence[str], env: Environment, show_traceback: bool, handler_set: bool) -> int:
    try:
        # Click writes help and prompts to sys.stdout: point it at the injected streams.
        with redirect_stdout(env.stdout), redirect_stderr(env.stderr):
            # Without standalone mode, click returns the code of ctx.exit(code) instead of
            # raising it; a command that finishes normally returns None.
            status = cli.main(
                args=list(args),
                prog_name="pgdyno",
                standalone_mode=False,
                obj=replace(env, argv=tuple(args)),
            )
        return status if isinstance(status, int) else ExitStatus.OK
    except click.UsageError as exc:
        _settled(handler_set)
        _error(env, _usage_message(exc))
        return ExitStatus.USAGE
    except (click.Abort, KeyboardInterrupt):
        _settled(handler_set)
        _error(env, "interrupted; runs that had finished are saved in the results database.")
        return ExitStatus.INTERRUPTED
    except (PgdynoError, Interrupted) as exc:
        _settled(handler_set)
        if show_traceback:
            _traceback(env)
        _error(env, str(exc))
        return exc.exit_status
    except click.ClickException as exc:
        _settled(handler_set)
        _error(env, exc.format_message())
        return exc.exit_code
    except Exception as exc:
        _settled(handler_set)
        if show_traceback:
            _traceback(env)
        _error(
            env,
            f"internal error ({type(exc).__name__}: {exc}); run again as `pgdyno --traceback "
            "...` and report it.",
        )
        return ExitStatus.ERROR


def _error(env: Environment, message: str) -> None:
    """The one place errors reach the user: one line, no password, no raw control character,
    no word too long to read (a 64 KB connection string is cut in its middle)."""
    # A message may quote a tool's multi-line text: its line breaks become spaces.
    line = re.sub(r"\s*[\r\n]+\s*", " ", message.strip())
    print(f"pgdyno: error: {shorten_words(safe_text(line))}", file=env.stderr)


def _traceback(env: Environment) -> None:
    # Exception texts may quote a connection string: scrub it here as well.
    print(safe_text(traceback.format_exc(), multiline=True), end="", file=env.stderr)


def run() -> None:
    """Console-script entry point. Once `main` has decided the exit status, a late SIGTERM or
    Ctrl-C (a supervisor repeating its request) cannot turn it into death by signal (143)."""
    status = main(sys.argv[1:], Environment.from_os())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(status)
