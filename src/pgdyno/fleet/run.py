"""`pgdyno fleet run`: one plan on several hosts at once, each benchmarking its own server.

This machine is the controller. For each host it starts one `pgdyno compare PLAN --ssh HOST
--dsn DSN` of its own (a child process, its own work directory under the fleet's directory), so
each host gets everything `--ssh` gives: the agent, the remote timeline, pgbench beside the
server, settings journalled and restored. A host that fails or cannot be reached ends its own
child only; the others go on, and the failed ones are named at the end.

Results: with a PostgreSQL results store every child writes into it directly (many writers are
safe there); with SQLite each child writes its own file, imported into the results store as
the child ends (importing is idempotent, so nothing is counted twice). Hosts need no access to
the store either way: only this machine talks to it.

Ctrl-C (or SIGTERM) is passed to every child once; each stops its run, restores its server's
settings and ends; the runs measured so far are kept and imported. The signal handlers only
take note (they raise nothing), so a stop request, or ten of them, cannot cut the controller's
own bookkeeping short: every child is awaited, imported and recorded, whatever arrives when.
A controller that fails for any other reason stops its children the same way before it ends.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgdyno.environment import DSN_PASSWORD_ENV, Environment
from pgdyno.errors import ExitStatus, Interrupted, PgdynoError, WorkdirError
from pgdyno.fleet.hosts import HostSpec, load_hosts
from pgdyno.fleet.status import FLEETS_DIR, FleetState, HostState
from pgdyno.plan.load import load_plan
from pgdyno.postgres.client import split_password
from pgdyno.process import start_session
from pgdyno.results.exchange import import_runs
from pgdyno.results.open import open_results

_PROGRESS = re.compile(r"^run \d+ \((\d+)/(\d+)\)")
_ERROR = "pgdyno: error: "
POLL_S = 0.5


@dataclass
class _Child:
    state: HostState
    directory: Path
    process: subprocess.Popen[str] | None = None
    reader: threading.Thread | None = None


@dataclass(frozen=True)
class FleetOutcome:
    directory: Path
    state: FleetState

    def unfinished(self, results: object) -> str | None:
        """Why the run failed: the hosts that did not finish, and where the others' runs are
        (`results`); None when every host finished."""
        failed = [h for h in self.state.hosts if h.state != "done"]
        if not failed:
            return None
        named = "; ".join(f"{h.name} ({h.message or h.state})" for h in failed)
        return (f"{len(failed)} of {len(self.state.hosts)} hosts did not finish: {named}; the "
                f"other hosts' runs are in {results}.")  # fmt: skip


def fleet_directory(env: Environment, plan_name: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return env.data_dir / FLEETS_DIR / f"{plan_name}-{stamp}"


def _child_env(env: Environment, host: HostSpec) -> tuple[str, dict[str, str]]:
    """The host's connection string without its password, and the child's environment, which
    carries the password (and the results store's connection string) instead of argv.

    The password goes in DSN_PASSWORD_ENV, which the child reads for --dsn's server only; in
    libpq's PGPASSWORD it would be sent to every server the child connects to without a
    password of its own, the results store among them."""
    dsn, password = split_password(host.dsn, f"{host.name}'s dsn")
    child = {k: v for k, v in env.env.items() if k != DSN_PASSWORD_ENV}
    if password is not None:
        child[DSN_PASSWORD_ENV] = password
    if env.results.conninfo is not None:
        child["PGDYNO_RESULTS"] = env.results.conninfo
    return dsn, child


def _argv(plan: Path, host: HostSpec, dsn: str, directory: Path) -> list[str]:
    """The child's command line: the plan last, after `--`, as an absolute path (a plan named
    `-dash.toml` is not an option).

    >>> _argv(Path("/p/-dash.toml"), HostSpec(name="a", ssh="a", dsn="x"), "x", Path("/f/a"))[3:]
    ['compare', '--ssh', 'a', '--dsn', 'x', '--workdir', '/f/a', '--', '/p/-dash.toml']
    """
    return [sys.executable, "-m", "pgdyno", "compare", "--ssh", host.ssh, "--dsn", dsn,
            "--workdir", str(directory), "--", str(plan.absolute())]  # fmt: skip


class Fleet:
    """The controller: children, their progress, the status file."""

    def __init__(
        self, env: Environment, plan: Path, hosts: Sequence[HostSpec], directory: Path,
        say: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.env, self.plan, self.hosts, self.directory, self.say = env, plan, hosts, directory, say
        self._lock = threading.Lock()
        self._changed = False  # progress the status file does not show yet
        self.children = [_Child(HostState(h.name, h.ssh), directory / h.name) for h in hosts]
        self.state = FleetState(
            plan=str(plan), controller_pid=os.getpid(), started_at=_now(), results=str(env.results),
            hosts=[c.state for c in self.children],
        )  # fmt: skip

    def save(self) -> None:
        """Write the status file (from the main thread only; readers set `_changed`)."""
        with self._lock:
            self._changed = False
            try:
                self.state.save(self.directory)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                raise WorkdirError(
                    f"cannot write the fleet's status file in {self.directory} ({reason}): "
                    "check that directory and its file system (no host is left running)."
                ) from None

    def start(self, stop: _Stop) -> None:
        """Every host's directory and the status file first (a failure there starts no child),
        then the children; none is started once a stop was asked for."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for child in self.children:
            child.directory.mkdir(parents=True, exist_ok=True)
        self.save()
        for host, child in zip(self.hosts, self.children, strict=True):
            if stop.requested is not None:
                break
            dsn, child_env = _child_env(self.env, host)
            child.process = start_session(_argv(self.plan, host, dsn, child.directory), child_env)
            child.state.state = "running"
            child.reader = threading.Thread(target=self._follow, args=(child,), daemon=True)
            child.reader.start()
        self.save()

    def _follow(self, child: _Child) -> None:
        """Read a child's messages: its log file, the progress shown, the status kept."""
        assert child.process is not None and child.process.stderr is not None
        with (child.directory / "pgdyno.log").open("a") as log:
            for line in child.process.stderr:
                log.write(line)
                text = line.rstrip()
                if not text:
                    continue
                self.say(f"[{child.state.name}] {text}")
                with self._lock:
                    if match := _PROGRESS.match(text):
                        child.state.runs_done = int(match[1])
                        child.state.runs_planned = int(match[2])
                    child.state.message = text.removeprefix(_ERROR)
                    if match:  # `fleet status` from another terminal follows each run
                        self._changed = True

    def wait(self, stop: _Stop) -> None:
        """Until every child has ended; the status file follows each change. A stop request
        is passed to each child still running, once."""
        while running := [c for c in self.children if c.state.state == "running"]:
            if stop.requested is not None and not stop.passed_on:
                stop.passed_on = True
                self.say("stopping every host: each restores its server's settings")
                self.interrupt(stop.requested)
            for child in running:
                assert child.process is not None
                code = child.process.poll()
                if code is not None:
                    self._ended(child, code, stop)
            if self._changed:
                self.save()
            time.sleep(POLL_S)

    def _ended(self, child: _Child, code: int, stop: _Stop) -> None:
        if child.reader is not None:
            child.reader.join(10)
        with self._lock:
            child.state.exit_code = code
            child.state.state = _state(code, stop)
        self._import(child)
        self.save()

    def _import(self, child: _Child) -> None:
        """A child's own SQLite results into the fleet's results store."""
        own = child.directory / "results.sqlite"
        if self.env.results.conninfo is not None or not own.is_file():
            return
        try:
            with open_results(self.env.results) as store:
                import_runs(store.db, own)
        except PgdynoError as exc:
            with self._lock:
                child.state.message = f"its runs could not be imported ({exc}); they stay in {own}"
            self.say(f"[{child.state.name}] {child.state.message}")

    def interrupt(self, sig: int) -> None:
        """Pass a stop request to every child still running (each restores its server)."""
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                with suppress(ProcessLookupError):
                    child.process.send_signal(sig)

    def abandon(self) -> None:
        """The controller failed: stop every child still running and wait until each has
        ended (restoring its server). The status file is left alone: it may be what failed."""
        self.interrupt(signal.SIGTERM)
        for child in self.children:
            if child.process is not None:
                child.process.wait()

    def never_started(self) -> None:
        """Hosts whose child was not started (a stop came first): interrupted."""
        for child in self.children:
            if child.process is None:
                child.state.state = "interrupted"
                child.state.message = "not started: the fleet run was stopped first"

    def finish(self) -> FleetOutcome:
        self.state.finished_at = _now()
        self.save()
        return FleetOutcome(self.directory, self.state)


def fleet_run(
    env: Environment, plan_file: Path, hosts_file: Path, say: Callable[[str], None]
) -> FleetOutcome:
    """`pgdyno fleet run`: the plan checked once, before any host starts, then `run_fleet`."""
    plan = load_plan(plan_file)  # a broken plan is refused once, before any host starts
    hosts = load_hosts(hosts_file)
    say(f"fleet: plan {plan.name} on {len(hosts)} hosts ({', '.join(h.name for h in hosts)})")
    return run_fleet(env, plan_file, hosts, say)


def run_fleet(
    env: Environment, plan: Path, hosts: Sequence[HostSpec], say: Callable[[str], None]
) -> FleetOutcome:
    """Run `plan` on every host at once; the fleet's state when all have ended. Interrupted
    (after every child stopped and restored) on Ctrl-C or SIGTERM, however many arrive."""
    fleet = Fleet(env, plan, hosts, fleet_directory(env, plan.stem), say)
    with _stop_requests() as stop:
        try:
            fleet.start(stop)
            fleet.wait(stop)
        except BaseException:
            # Not a stop request (those raise nothing): the controller itself failed. Its
            # children are stopped and awaited before the error is told: none is left behind.
            fleet.abandon()
            raise
        fleet.never_started()
        outcome = fleet.finish()
    if stop.requested is not None:
        raise Interrupted("the fleet run was interrupted; every host was stopped and restored, "
                          "and the runs measured are stored.")  # fmt: skip
    return outcome


def _state(code: int, stop: _Stop) -> str:
    """A child's state from its exit status: one that ended on the stop request passed to it
    (130, or killed by that signal before its own handler was set) was interrupted.

    >>> stopping = _Stop(requested=signal.SIGTERM, passed_on=True)
    >>> _state(0, _Stop()), _state(130, _Stop()), _state(-15, _Stop()), _state(-15, stopping)
    ('done', 'interrupted', 'failed', 'interrupted')
    """
    if code == 0:
        return "done"
    if code == ExitStatus.INTERRUPTED:
        return "interrupted"
    sig = stop.requested
    asked = sig is not None and stop.passed_on and code in (-sig, 128 + sig)
    return "interrupted" if asked else "failed"


@dataclass
class _Stop:
    """The first stop request (SIGINT or SIGTERM) and whether it went to the children."""

    requested: int | None = None
    passed_on: bool = False


@contextmanager
def _stop_requests() -> Iterator[_Stop]:
    """SIGINT and SIGTERM only take note; the controller's loop passes them on. Later
    requests add nothing: the children are already restoring their servers."""
    stop = _Stop()

    def on_signal(signum: int, _frame: object) -> None:
        stop.requested = stop.requested or signum

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
