"""The one place that starts external programs.

Argument lists only (never a shell). Children get their own process group and die with pgdyno,
so a killed pgdyno does not leave a pgbench running; `Child` owns terminate -> kill -> reap.
Failures become `ProcessError` carrying the program's stderr.

Dying with pgdyno: Python documents `preexec_fn` as unsafe once threads run (the timeline
sampler does), so the child is not touched between fork and exec. Instead its argv is prefixed
with util-linux's `setpriv --pdeathsig TERM --`, which sets PR_SET_PDEATHSIG and execs the
program. Order matters and holds: the user switch (`user=`) happens in the child before setpriv
runs, and the kernel clears the setting only on a later credential change or a set-user-ID
exec, neither of which follows. The signal fires when the *thread* that forked the child ends,
so a child must be waited for by the thread that started it (every caller here does). Without
setpriv, the terminate -> kill -> reap of `Child` on every exit path is the fallback (it does
not cover a SIGKILL of pgdyno itself).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from pgdyno.errors import ProcessError

SETPRIV = Path("/usr/bin/setpriv")
_PDEATHSIG = ("--pdeathsig", "TERM", "--")


@dataclass(frozen=True)
class RunAs:
    """An unprivileged OS user that programs are started as (root drops to it), with the
    supplementary groups the user has in /etc/group, as a login would give them (initgroups):
    a packaged server reads its SSL key through the `ssl-cert` group, for one."""

    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def lookup(cls, name: str) -> RunAs | None:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            return None
        return cls(name, entry.pw_uid, entry.pw_gid, entry.pw_dir)

    @classmethod
    def of_uid(cls, uid: int) -> RunAs:
        entry = pwd.getpwuid(uid)
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)

    def groups(self) -> list[int]:
        """The user's groups as initgroups(3) would set them."""
        try:
            return os.getgrouplist(self.name, self.gid)
        except OSError:
            return [self.gid]


@functools.cache
def _setpriv_works() -> bool:
    """True when setpriv exists and knows --pdeathsig (util-linux 2.33+): tried once."""
    if not os.access(SETPRIV, os.X_OK):
        return False
    try:
        probe = subprocess.run(
            [str(SETPRIV), *_PDEATHSIG, "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def dying_with_parent(args: list[str], env: Mapping[str, str]) -> list[str]:
    """The argv that starts `args` so that it gets SIGTERM when its parent thread ends.

    The program is looked up here (as exec would, in the child's PATH) so that a missing or
    non-executable program is still reported as such, not as a failure of setpriv.
    """
    program = args[0]
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        path = Path(program)
        if "/" in program and path.exists() and not path.is_dir():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if not _setpriv_works():
        return args
    return [str(SETPRIV), *_PDEATHSIG, found, *args[1:]]


def _popen_kwargs(
    run_as: RunAs | None, env: Mapping[str, str] | None, cwd: Path | None
) -> dict[str, object]:
    kwargs: dict[str, object] = {"cwd": str(cwd) if cwd else None}
    child_env = dict(env) if env is not None else dict(os.environ)
    if run_as is not None and os.geteuid() != run_as.uid:
        kwargs.update(user=run_as.uid, group=run_as.gid, extra_groups=run_as.groups())
        child_env.update(HOME=run_as.home, USER=run_as.name, LOGNAME=run_as.name)
    kwargs["env"] = child_env
    return kwargs


def run(
    argv: Sequence[str | Path],
    *,
    what: str,
    run_as: RunAs | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = 600,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a program to completion and capture its output.

    `what` names the action for error messages ("initdb", "pg_ctl start", ...).
    """
    args = [str(a) for a in argv]
    kwargs = _popen_kwargs(run_as, env, cwd)
    try:
        proc: subprocess.CompletedProcess[str] = subprocess.run(
            dying_with_parent(args, kwargs["env"]),  # type: ignore[arg-type]
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            **kwargs,  # type: ignore[call-overload]
        )
    except FileNotFoundError as exc:
        raise ProcessError(f"{what} failed because {args[0]} does not exist.") from exc
    except PermissionError as exc:
        raise ProcessError(f"{what} failed because {args[0]} is not executable.") from exc
    except subprocess.TimeoutExpired as exc:
        raise ProcessError(f"{what} did not finish within {timeout:.0f} s.") from exc
    if check and proc.returncode != 0:
        raise ProcessError(
            f"{what} failed (exit code {proc.returncode}): {last_line(proc.stderr or proc.stdout)}",
            stderr=proc.stderr,
            returncode=proc.returncode,
        )
    return proc


def start_guard(argv: Sequence[str | Path]) -> subprocess.Popen[bytes]:
    """Start a helper tied to pgdyno by a pipe on its stdin (see postgres/watchdog.py).

    The kernel closes the pipe when pgdyno exits, however it exits, which is what the helper
    waits for. It gets a session of its own: terminal signals are pgdyno's to handle.
    """
    return subprocess.Popen(
        [str(a) for a in argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def start_session(argv: Sequence[str | Path], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """Start a pgdyno of its own (`fleet run`'s one per host), its stderr piped for the caller
    to follow line by line, stdin and stdout closed.

    It gets a session of its own, so a Ctrl-C at the terminal reaches only the caller, which
    passes each child the stop request itself (each child restores its server's settings before
    it ends); the caller waits for every child, whatever happens.
    """
    args = [str(a) for a in argv]
    try:
        return subprocess.Popen(
            args, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise ProcessError(f"could not start {args[0]}: {exc.strerror}.") from exc


def last_line(text: str) -> str:
    """The most telling line of a program's complaint: the last non-empty one.

    >>> last_line("warning\\nFATAL:  role x does not exist\\n\\n")
    'FATAL:  role x does not exist'
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


class Child:
    """A long-running child (pgbench) in its own process group, always reaped.

    Use as a context manager: leaving the block (normally, by exception or by Ctrl-C)
    terminates the whole group if it is still running.
    """

    def __init__(
        self,
        argv: Sequence[str | Path],
        *,
        stdout: IO[str],
        stderr: IO[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        run_as: RunAs | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        kwargs = _popen_kwargs(run_as, env, cwd)
        try:
            self.popen: subprocess.Popen[str] = subprocess.Popen(
                dying_with_parent(self.argv, kwargs["env"]),  # type: ignore[arg-type]
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                text=True,
                # Its own process group (to signal it whole), but pgdyno's session: a new
                # session would put pgbench in a scheduler autogroup of its own, which measured
                # ~5% fewer TPS where sched_autogroup_enabled=1 (the seed 000 effect). setpriv
                # keeps both (it execs in place: same pid, group and session).
                process_group=0,
                **kwargs,  # type: ignore[call-overload]
            )
        except OSError as exc:
            raise ProcessError(f"could not start {self.argv[0]}: {exc.strerror}.") from exc

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def poll(self) -> int | None:
        code = self.popen.poll()
        return None if code is None else int(code)

    def wait(self, timeout: float | None = None) -> int:
        return int(self.popen.wait(timeout))

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, then SIGKILL after `grace` seconds; always reap."""
        if self.popen.poll() is not None:
            return
        _signal_group(self.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                return
            time.sleep(0.05)
        _signal_group(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def wait_until(condition: Callable[[], bool], timeout: float, tick: float = 0.1) -> bool:
    """Poll `condition` every `tick` seconds until it holds or `timeout` seconds have passed;
    whether it held.

    >>> wait_until(lambda: True, 0.0), wait_until(lambda: False, 0.0)
    (True, False)
    """
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(tick)


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists (zombies excluded)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def pid_cmdline(pid: int) -> list[str]:
    """The argv of a running process, or [] when it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def same_process(pid: int, started: int | None) -> bool:
    """True when `pid` is alive and is the process that was started at `started`."""
    return pid_alive(pid) and (started is None or start_time(pid) == started)
