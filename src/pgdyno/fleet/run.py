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

Ctrl-C (or SIGTERM) is passed to every child; each stops its run, restores its server's
settings and ends; the runs measured so far are kept and imported.
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
from pgdyno.errors import Interrupted, PgdynoError
from pgdyno.fleet.hosts import HostSpec
from pgdyno.fleet.status import FLEETS_DIR, FleetState, HostState
from pgdyno.postgres.client import split_password
from pgdyno.store.exchange import import_runs
from pgdyno.store.open import open_results

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
    return [sys.executable, "-m", "pgdyno", "compare", str(plan), "--ssh", host.ssh,
            "--dsn", dsn, "--workdir", str(directory)]  # fmt: skip


class Fleet:
    """The controller: children, their progress, the status file."""

    def __init__(
        self, env: Environment, plan: Path, hosts: Sequence[HostSpec], directory: Path,
        say: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.env, self.plan, self.hosts, self.directory, self.say = env, plan, hosts, directory, say
        self._lock = threading.Lock()
        self.children = [_Child(HostState(h.name, h.ssh), directory / h.name) for h in hosts]
        self.state = FleetState(
            plan=str(plan), controller_pid=os.getpid(), started_at=_now(), results=str(env.results),
            hosts=[c.state for c in self.children],
        )  # fmt: skip

    def save(self) -> None:
        with self._lock:
            self.state.save(self.directory)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for host, child in zip(self.hosts, self.children, strict=True):
            child.directory.mkdir(parents=True, exist_ok=True)
            dsn, child_env = _child_env(self.env, host)
            child.process = subprocess.Popen(
                _argv(self.plan, host, dsn, child.directory), env=child_env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True, errors="replace", start_new_session=True,
            )  # fmt: skip
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
                if match:  # `fleet status` from another terminal follows each finished run
                    self.save()

    def wait(self) -> None:
        """Until every child has ended; the status file follows each change."""
        while running := [c for c in self.children if c.state.state == "running"]:
            for child in running:
                assert child.process is not None
                code = child.process.poll()
                if code is not None:
                    self._ended(child, code)
            time.sleep(POLL_S)

    def _ended(self, child: _Child, code: int) -> None:
        if child.reader is not None:
            child.reader.join(10)
        with self._lock:
            child.state.exit_code = code
            child.state.state = {0: "done", 130: "interrupted"}.get(code, "failed")
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

    def finish(self) -> FleetOutcome:
        self.state.finished_at = _now()
        self.save()
        return FleetOutcome(self.directory, self.state)


def run_fleet(
    env: Environment, plan: Path, hosts: Sequence[HostSpec], say: Callable[[str], None]
) -> FleetOutcome:
    """Run `plan` on every host at once; the fleet's state when all have ended. Interrupted
    (after every child stopped and restored) on Ctrl-C or SIGTERM."""
    fleet = Fleet(env, plan, hosts, fleet_directory(env, plan.stem), say)
    fleet.start()
    stopping = None
    with _stop_requests() as stop:
        while True:
            try:
                fleet.wait()
                break
            except KeyboardInterrupt:  # passed on; the children's ends are still awaited
                stopping = stopping or "interrupted"
                fleet.interrupt(stop.signal)
                say("stopping every host: each restores its server's settings")
    outcome = fleet.finish()
    if stopping:
        raise Interrupted("the fleet run was interrupted; every host was stopped and restored, "
                          "and the runs measured are stored.")  # fmt: skip
    return outcome


class _Stop:
    signal: int = signal.SIGINT


@contextmanager
def _stop_requests() -> Iterator[_Stop]:
    """SIGTERM is taken as Ctrl-C (passed on to the children as SIGTERM)."""
    stop = _Stop()

    def on_term(signum: int, _frame: object) -> None:
        stop.signal = signum
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
