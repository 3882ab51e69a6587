"""pgbench on the remote host, beside the server (as the seeds ran it), through the agent.

Its files (stdout, stderr, transaction logs) are written in the agent's temporary directory
and fetched into the local run directory when it ends, so everything after the run (parsing,
the per-second rows, the health verdict) is the same code as for a local pgbench. Only
PG* variables of the environment go along (a password among them, never on a command line).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import ParseError, PgbenchFailed, RemoteFailed
from pgdyno.pgbench.command import RunOptions, run_argv
from pgdyno.pgbench.execute import (
    GRACE_S,
    PgbenchResult,
    pgbench_result,
    wait_for_exit,
)
from pgdyno.postgres.binaries import parse_version_output
from pgdyno.postgres.client import dbname_of, with_dbname
from pgdyno.remote.agent_client import Agent, ClockOffset

# Where pgbench is looked for on the remote host: its PATH, then the packagers' directories
# (Debian and Ubuntu, the PGDG RPMs).
POLL_S = 0.2  # how often pgbench's exit is polled: its end is noticed within this
PGBENCH_GLOBS = ("/usr/lib/postgresql/*/bin/pgbench", "/usr/pgsql-*/bin/pgbench")


def find_pgbench(agent: Agent, server_major: int) -> tuple[str, str] | None:
    """(path, version) of the remote pgbench to drive `server_major`: the same major if there
    is one, else the newest; None when the host has none."""
    found = agent.request("which", names=["pgbench"], globs=list(PGBENCH_GLOBS))["found"]
    versions = []
    for path in found:
        ran = agent.request("run", argv=[path, "--version"], timeout=30)
        if ran["code"] == 0:
            try:
                versions.append((path, parse_version_output(ran["stdout"])))
            except ParseError:
                continue
    if not versions:
        return None

    def rank(item: tuple[str, str]) -> tuple[bool, float]:
        major = float(item[1].split(".")[0])
        return major == server_major, major

    return max(versions, key=rank)


@dataclass
class RemoteDriver:
    agent: Agent
    offset: ClockOffset
    remote_dsn: str  # the server as the remote host reaches it (no password)
    pgbench: str  # its path there
    version: str
    _scripts: dict[Path, str] = field(default_factory=dict)  # uploaded script files

    @property
    def host(self) -> str:
        return str(self.agent.session.destination)

    @property
    def log_clock_shift_s(self) -> int:
        return -round(self.offset.offset_s)

    def _remote_dir(self, run_dir: Path) -> str:
        digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
        return f"{self.agent.directory}/run-{digest}"

    def _script(self, local: Path) -> str:
        """The remote copy of a script file (uploaded once)."""
        if local not in self._scripts:
            remote = f"{self.agent.directory}/script-{len(self._scripts)}-{local.name}"
            self.agent.session.put(local, remote)
            self._scripts[local] = remote
        return self._scripts[local]

    def argv(
        self, dsn: str, opts: RunOptions, log_prefix: Path | None, *, sampling_rate: float = 1.0,
        scale: int | None = None,
    ) -> list[str]:  # fmt: skip
        """pgbench's command line on the remote host: its pgbench, the server as it sees it,
        the log and the script files in the agent's directory."""
        remote_dsn = with_dbname(self.remote_dsn, dbname_of(dsn) or "postgres")
        prefix = None if log_prefix is None else Path(self._remote_dir(log_prefix.parent)) / "tx"
        argv = run_argv(Path(self.pgbench), remote_dsn, opts, prefix, sampling_rate=sampling_rate,
                        scale=scale)  # fmt: skip
        for i, arg in enumerate(argv[:-1]):
            if arg == "-f":
                path, at, weight = argv[i + 1].rpartition("@")
                argv[i + 1] = f"{self._script(Path(path))}{at}{weight}"
        return argv

    def execute(
        self, argv: list[str], *, run_dir: Path, duration_s: float, env: Mapping[str, str],
        on_tick: Callable[[float], None], on_spawn: Callable[[int], None] | None = None,
    ) -> PgbenchResult:  # fmt: skip
        remote = self._remote_dir(run_dir)
        self.agent.request("run", argv=["mkdir", "-p", remote])
        pg_env = {k: v for k, v in env.items() if k.startswith("PG")}
        started = time.monotonic()
        pid = self.agent.request(
            "spawn", argv=argv, env=pg_env, cwd=remote,
            stdout=f"{remote}/pgbench.stdout", stderr=f"{remote}/pgbench.stderr",
        )["pid"]  # fmt: skip
        started_at = time.time()
        if on_spawn:
            on_spawn(pid)
        try:
            code = self._wait(pid, started, duration_s, on_tick)
            out, err = self._outputs(remote)
            self._fetch_logs(remote, run_dir)
        finally:
            self.agent.request("kill", pid=pid)
            self.agent.request("run", argv=["rm", "-rf", "--", remote])
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "pgbench.stdout").write_text(out)
        (run_dir / "pgbench.stderr").write_text(err)
        return pgbench_result(code, out, err, started_at, f" (on {self.host})")

    def _wait(
        self, pid: int, started: float, duration_s: float, on_tick: Callable[[float], None]
    ) -> int:
        """pgbench's exit code, polled without blocking the agent (the sampler asks it too)."""
        code = wait_for_exit(
            lambda: self._exit_code(pid), started, duration_s, on_tick,
            sleep=lambda: time.sleep(POLL_S), tick_s=1.0,
        )  # fmt: skip
        if code is None:
            raise PgbenchFailed(f"pgbench on {self.host} did not finish within "
                                f"{duration_s + GRACE_S:.0f} s and was stopped.")  # fmt: skip
        return code

    def _exit_code(self, pid: int) -> int | None:
        code = self.agent.request("wait", pid=pid, timeout=0)["code"]
        return None if code is None else int(code)

    def _outputs(self, remote: str) -> tuple[str, str]:
        paths = [f"{remote}/pgbench.stdout", f"{remote}/pgbench.stderr"]
        files = self.agent.request("read", paths=paths)["files"]
        return files[paths[0]] or "", files[paths[1]] or ""

    def _fetch_logs(self, remote: str, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        for path in self.agent.request("list", glob=f"{remote}/tx.*")["paths"]:
            name = Path(path).name
            try:
                self.agent.session.get(path, run_dir / name)
            except RemoteFailed as exc:
                raise PgbenchFailed(
                    f"pgbench's transaction log could not be fetched ({exc})"
                ) from None
