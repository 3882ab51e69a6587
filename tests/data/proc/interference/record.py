"""Record two real /proc snapshots for tests/unit/test_interference.py (run as root, once).

    python3 record.py DEST

Copies /proc/stat and every /proc/<pid>/stat to DEST/t0 and DEST/t1 (with `at`, the
`time.monotonic()` read just before copying), with these processes alive, each named through
/proc/self/comm so the test finds it by name:

- `pgdyno-rec` (this script): the experiment's root, as pgdyno's own process is;
  `exp-busy`, its child, spins through both snapshots (experiment CPU); `exp-writer`, its
  other child, writes 1 GiB to a file between the snapshots and calls sync(2), so kernel
  threads (the flusher's kworkers, jbd2) spend CPU writing the experiment's data back;
- `srv-main` (detached, like a postmaster) with its child `srv-backend` spinning: the second
  root, the server;
- `hog` (detached): spins through both snapshots, the foreign consumer;
- `make` (detached): between the snapshots it starts `cc1`, which spins about 0.4 s and is
  reaped by `make` (only `make`'s cutime shows it);
- `sh-parent` (detached): its child `old-tenant` spun 0.3 s before t0 and sleeps; between the
  snapshots `sh-parent` kills and reaps it, then forks `new-tenant` on the same pid (through
  /proc/sys/kernel/ns_last_pid), which spins about 0.2 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import os, sys, time, signal
from pathlib import Path

def name(comm):
    Path("/proc/self/comm").write_text(comm)

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def forever():
    while True:
        pass

def wait_trigger():
    while not Path(sys.argv[2]).exists():
        time.sleep(0.01)

role = sys.argv[1]
if os.fork():  # detach: the intermediate exits, the worker is reparented
    os._exit(0)
os.setsid()
if role == "hog":
    name("hog"); forever()
elif role == "server":
    name("srv-main")
    if os.fork() == 0:
        name("srv-backend"); forever()
    while True:
        time.sleep(1)
elif role == "make":
    name("make")
    wait_trigger()
    child = os.fork()
    if child == 0:
        name("cc1"); spin(0.4); os._exit(0)
    os.waitpid(child, 0)
    while True:
        time.sleep(1)
elif role == "reuse":
    name("sh-parent")
    old = os.fork()
    if old == 0:
        name("old-tenant"); spin(0.3)
        while True:
            time.sleep(1)
    Path(sys.argv[3]).write_text("ready")
    wait_trigger()
    os.kill(old, signal.SIGKILL)
    os.waitpid(old, 0)
    for _ in range(200):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(old - 1))
        new = os.fork()
        if new == 0:
            if os.getpid() != old:
                os._exit(0)
            name("new-tenant"); spin(0.2)
            while True:
                time.sleep(1)
        if new == old:
            break
        os.waitpid(new, 0)
    Path(sys.argv[3]).write_text(f"reused {old}" if new == old else "failed")
    while True:
        time.sleep(1)
"""

WRITER = r"""
import os, sys
from pathlib import Path
Path("/proc/self/comm").write_text("exp-writer")
block = b"x" * (1 << 20)
with open(sys.argv[1], "wb") as out:
    for _ in range(1024):
        out.write(block)
os.sync()
"""


def snapshot(dest: Path) -> None:
    dest.mkdir(parents=True)
    at = time.monotonic()
    (dest / "stat").write_bytes(Path("/proc/stat").read_bytes())
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_bytes()
            except OSError:
                continue
            (dest / entry.name).mkdir()
            (dest / entry.name / "stat").write_bytes(text)
    (dest / "at").write_text(f"{at:.6f}\n")


def pids_named(comm: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == comm:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def main(dest: Path) -> None:
    Path("/proc/self/comm").write_text("pgdyno-rec")
    trigger, status = dest / "trigger", dest / "reuse-status"
    dest.mkdir(parents=True)
    busy = subprocess.Popen(  # an experiment child
        [sys.executable, "-c", "from pathlib import Path\nPath('/proc/self/comm').write_text("
         "'exp-busy')\nwhile True: pass"]
    )  # fmt: skip
    for role in ("hog", "server", "make", "reuse"):
        subprocess.run([sys.executable, "-c", CHILD, role, str(trigger), str(status)], check=True)
    while not status.exists():
        time.sleep(0.05)
    time.sleep(1.5)  # old-tenant's 0.3 s of CPU is spent before t0
    snapshot(dest / "t0")
    trigger.write_text("go")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(dest / "written")])
    while "reused" not in status.read_text() and "failed" not in status.read_text():
        time.sleep(0.05)
    time.sleep(2.0)  # cc1 and new-tenant finish spinning
    writer.wait()
    snapshot(dest / "t1")
    print(status.read_text())
    busy.kill()
    busy.wait()
    for comm in ("hog", "srv-main", "srv-backend", "make", "sh-parent", "new-tenant"):
        for pid in pids_named(comm):
            os.kill(pid, signal.SIGKILL)
    trigger.unlink()
    (dest / "written").unlink()
    status.unlink()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
