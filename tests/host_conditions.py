"""Host conditions a test needs, made by the test itself, so that what it claims is checked on
every host (a busy shared runner included) or skipped with the reason; never left to chance.

- `cpu_hog`: another program busy on a CPU beside a run (the interference path); also
  detached, for pgdyno run in-process, or inside a quiet namespace, to flag some runs only.
- `quiet_pgdyno`: pgdyno in a PID namespace of its own, where the only processes it can see are
  its own: no foreign CPU to flag, as in a container (the "quiet host" path). The rest of the
  machine still slows the runs, so no test asserts a noise level; only steal, which the
  namespace cannot hide, still flags a run, and `no_steal` skips then with the figure.
- `huge_pages`: huge pages reserved (after compaction) and the previous count put back exactly.
- `huge_page_pool`: the machine's pool of huge pages to this test alone, for a test that
  reserves pages for a server or starts one that may map free pages of the pool.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PGDYNO = Path(sys.executable).parent / "pgdyno"
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")
COMPACT_MEMORY = Path("/proc/sys/vm/compact_memory")
POOL_LOCK = Path("/tmp/pgdyno-tests-hugepages.lock")
# What pgdyno flags (collect/interference.py): a share of the machine, in %.
FLAG_PCT = 5.0


HOG = (sys.executable, "-c", "while True: pass")
HOG_NAME = "pgdyno-testhog"  # a detached hog's /proc/<pid>/comm (15 characters at most)
# Detached twice (fork, the middle process exits): no descendant of the test process. Ends by
# itself after two minutes should the test process die before it kills it.
DETACHED_HOG = f"""
import os, sys, time
from pathlib import Path
if os.fork():
    os._exit(0)
os.setsid()
Path("/proc/self/comm").write_text("{HOG_NAME}")
print(os.getpid(), flush=True)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)  # the starter's pipes closed: it returns now
os.dup2(null, 2)
end = time.monotonic() + 120
while time.monotonic() < end:
    pass
"""


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (scanned: this kernel may lack .../children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone already
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _only_child(pid: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if children := _children(pid):
            return children[0]
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child")


@contextmanager
def cpu_hog(
    inside: subprocess.Popen[str] | None = None, *, detached: bool = False
) -> Iterator[int]:
    """A busy loop (a whole CPU: 50% of a 2-CPU machine), killed (and reaped) when the block
    ends, whatever happens in it; yields its pid. Which pgdyno sees it as foreign:

    - by default, a child of this process: a pgdyno run as its own process
      (`conftest.pgdyno_process`), whose experiment is its own descendants; NOT pgdyno run
      in-process (`run_cli`), whose experiment then includes every child of the test process;
    - `detached`: re-parented away from this process (named HOG_NAME): any pgdyno, in-process
      too; the kernel's reaper collects it;
    - `inside`: a `quiet_process`, whose PID namespace it joins through nsenter, as no
      descendant of pgdyno there."""
    if detached:
        with _detached_hog() as pid:
            yield pid
    elif inside is not None:
        with _hog_inside(inside) as pid:
            yield pid
    else:
        child = subprocess.Popen(HOG, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            yield child.pid
        finally:
            child.kill()
            child.wait(timeout=30)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"  # dead, not reaped yet: it takes no CPU


@contextmanager
def _detached_hog() -> Iterator[int]:
    starter = subprocess.run(
        [sys.executable, "-c", DETACHED_HOG], stdin=subprocess.DEVNULL, capture_output=True,
        text=True, check=True, timeout=30,
    )  # fmt: skip
    pid = int(starter.stdout.split()[0])
    try:
        assert Path(f"/proc/{pid}/comm").read_text().strip() == HOG_NAME
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


@contextmanager
def _hog_inside(quiet: subprocess.Popen[str]) -> Iterator[int]:
    target = _only_child(quiet.pid)  # pgdyno, in the namespace unshare made
    nsenter = subprocess.Popen(
        ["nsenter", "--target", str(target), "--pid", "--", *HOG],
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        hog = _only_child(nsenter.pid)  # nsenter forks the hog into the namespace, and waits
        try:
            yield hog
        finally:
            os.kill(hog, signal.SIGKILL)  # nsenter reaps it and exits
    finally:
        if nsenter.poll() is None and not _children(nsenter.pid):
            nsenter.kill()
        nsenter.wait(timeout=30)


@dataclass(frozen=True)
class Finished:
    code: int
    stdout: str
    stderr: str


@cache
def _namespace_refused() -> str | None:
    """Why this host cannot give pgdyno a PID namespace of its own; None when it can."""
    if os.geteuid() != 0:
        return "a PID namespace of its own for pgdyno needs root"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"this host refuses a PID namespace: {probe.stderr.strip()}"
    return None


# Run first in quiet_process's namespace: --mount-proc gives it a mount namespace of its own,
# a private copy of every mount there was, which would keep another test's loop filesystems (and
# so its loop devices) in use after that test unmounts them, until this command ends. The copies
# of loop mounts are dropped (lazily, deepest first), then pgdyno runs in its place.
WITHOUT_LOOP_MOUNTS = """
import os, subprocess, sys
for line in reversed(open("/proc/self/mountinfo").read().splitlines()):
    fields = line.split()
    if fields[fields.index("-") + 2].startswith("/dev/loop"):
        subprocess.run(["umount", "--lazy", fields[4]], check=False)
os.execv(sys.argv[1], sys.argv[1:])
"""


@contextmanager
def quiet_process(workdir: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`pgdyno ARGS --workdir WORKDIR` started in a PID namespace with its own /proc: it sees
    only its own processes (pgbench, the sandbox it starts), so no run is flagged for foreign CPU.

    The work directory must be used by no pgdyno outside the namespace while this runs: a
    sandbox left running there would look dead from inside (its pid is not in the namespace).
    Every process of the namespace ends when pgdyno does (the kernel kills them), and a sandbox
    pgdyno started, it stops itself; the command is killed if the block ends with it running.
    Skips (visibly) when the host cannot make the namespace."""
    refused = _namespace_refused()
    if refused is not None:
        pytest.skip(f"cannot make the host look quiet to pgdyno: {refused}")
    unshare = shutil.which("unshare")
    assert unshare is not None
    proc = subprocess.Popen(
        [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "--", sys.executable, "-c",
         WITHOUT_LOOP_MOUNTS, str(PGDYNO), *args, "--workdir", str(workdir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()  # --kill-child takes pgdyno, and with it the namespace, along
            proc.communicate()


def quiet_pgdyno(workdir: Path, *args: str, timeout: float = 600) -> Finished:
    """`quiet_process` run to its end."""
    with quiet_process(workdir, *args) as proc:
        stdout, stderr = proc.communicate(timeout=timeout)
    return Finished(proc.returncode, stdout, stderr)


def no_steal(
    flagged: Sequence[Mapping[str, object] | None], *, foreign_limit_pct: float = FLAG_PCT
) -> None:
    """Every run of a quiet_pgdyno command clean, or a visible skip when the hypervisor stole
    the CPU (which a namespace cannot hide); foreign CPU there would be a defect: it fails.
    A command run with `--foreign-cpu-limit` passes its limit as `foreign_limit_pct`."""
    for interference in flagged:
        if interference is None:
            continue
        foreign = float(interference["foreign_cpu_pct"])  # type: ignore[arg-type]
        assert foreign <= foreign_limit_pct, f"flagged for foreign CPU: {interference}"
        pytest.skip(f"the hypervisor stole {interference['steal_pct']}% of the CPU during a run")


def _pages() -> int:
    return int(NR_HUGEPAGES.read_text())


def _set_pages(count: int) -> None:
    NR_HUGEPAGES.write_text(f"{count}\n")


@contextmanager
def huge_page_pool() -> Iterator[None]:
    """The machine's pool of huge pages to this test alone for the block (an inter-process
    lock): held by a test that reserves pages for a server of its own, and by a test outside
    the host group whose server may map free reserved pages at a start (huge_pages = try:
    `tune --apply --layers postgresql` restarting a server with the advice, initdb before 16).
    Such a server started while another test's pages are reserved and free (its server
    restarting) takes them all when it fits, and that server's start with huge_pages = on fails
    (seen in CI: a Debian cluster tuned to the same shared_buffers took the 3,107 pages of the
    crash-point sweep)."""
    with POOL_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def huge_pages(count: int) -> Iterator[int]:
    """At least `count` huge pages reserved (vm.nr_hugepages raised to it, memory compacted
    first so the kernel finds contiguous 2 MB blocks) for the block; yields the count reserved.
    The previous vm.nr_hugepages is written back after, exactly, and checked. Skips (visibly)
    without root or when the kernel cannot reserve them (memory too small or fragmented).
    The pool is this test's meanwhile (huge_page_pool)."""
    if os.geteuid() != 0:
        pytest.skip("reserving huge pages (vm.nr_hugepages) needs root")
    if not NR_HUGEPAGES.exists():
        pytest.skip("this kernel has no huge pages (no /proc/sys/vm/nr_hugepages)")
    with huge_page_pool():
        yield from _reserved(count)


def _reserved(count: int) -> Iterator[int]:
    before = _pages()
    try:
        if before < count:
            if COMPACT_MEMORY.exists():
                COMPACT_MEMORY.write_text("1\n")
            _set_pages(count)
        got = _pages()
        if got < count:
            pytest.skip(f"the kernel reserved {got} of {count} huge pages (memory too fragmented)")
        yield got
    finally:
        _set_pages(before)
        assert _pages() == before, f"vm.nr_hugepages not restored to {before}"


@contextmanager
def holding_huge_pages(count: int) -> Iterator[int]:
    """`count` huge pages of the pool held by this process for the block (a hugetlb memfd,
    every page touched), as another cluster or a JVM would hold them; yields the count. They
    must be reserved already (huge_pages); skips visibly when the kernel gives fewer."""
    size = count * _huge_page_bytes()
    fd = os.memfd_create("pgdyno-test-held", os.MFD_HUGETLB)
    try:
        os.ftruncate(fd, size)
        try:
            held = mmap.mmap(fd, size)
        except OSError as exc:
            pytest.skip(f"the kernel would not give this test {count} huge pages to hold: {exc}")
        try:
            for offset in range(0, size, _huge_page_bytes()):
                held[offset] = 1  # a page is taken from the pool when first touched
            yield count
        finally:
            held.close()
    finally:
        os.close(fd)


def _huge_page_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Hugepagesize:"):
            return int(line.split()[1]) * 1024
    pytest.skip("this kernel has no huge pages (no Hugepagesize in /proc/meminfo)")
