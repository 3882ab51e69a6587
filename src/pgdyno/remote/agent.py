"""pgdyno's hand on a remote host: a standard-library program streamed over SSH.

pgdyno copies this one file into a fresh temporary directory of the remote host and runs it
with the host's `python3` (3.7 or later; nothing is installed). It answers one JSON request per
line on stdin with one JSON line on stdout:

  {"id": 1, "op": "clock"}                       -> wall and monotonic time, for the offset
  {"id": 2, "op": "read", "paths": [...]}         -> the text of each file (null: unreadable)
  {"id": 3, "op": "tree", "globs": [...]}         -> files and symlinks matching the globs
  {"id": 4, "op": "sample", "paths": [...], "interval": 1.0, "offset": 0.2}
        -> then, once per interval, {"tick": {"wall":, "mono":, "files": {...}}}
  {"id": 5, "op": "watch", "pid": 42}             -> its /proc/42/stat joins every tick
  {"op": "stop_sampling"}; {"op": "list", "glob": G} -> the paths matching G
  {"op": "resolve", "paths": [...]}                -> their real paths (null: not there)
  {"id": 6, "op": "spawn", "argv": [...], "env": {...}, "stdout": F, "stderr": F}
  {"id": 7, "op": "wait", "pid": 42, "timeout": 1.0}  -> exit code, or null while it runs
  {"id": 8, "op": "kill", "pid": 42}
  {"id": 9, "op": "run", "argv": [...], "timeout": 30}   -> exit code, stdout, stderr
  {"id": 10, "op": "which", "names": [...], "globs": [...]}  -> executables found

Ticks fall on whole seconds of the local (pgdyno's) clock: `offset` is remote minus local.
Environment variables given to `spawn` (a password) never touch a file or a command line.
When stdin closes, for whatever reason (pgdyno done, killed, the connection lost), the agent
stops its children and removes its own directory, so nothing is left on the host.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

MAX_FILE = 1 << 20  # a bigger file is cut: the agent reads /proc, /sys and /etc, not data
write_lock = threading.Lock()
children = {}  # type: dict[int, Any]
sampling = {"paths": [], "stop": threading.Event()}  # type: dict[str, Any]


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message)
    with write_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE).decode("utf-8", "replace")
    except OSError:
        return None


def read_files(paths: list[str]) -> dict[str, str | None]:
    return {path: read_text(path) for path in paths}


def tree_entry(path: str, entries: dict[str, list[str]]) -> None:
    """Record `path` as the remote has it: each symlink on the way (so that sysfs links resolve
    in the copy), then the file under its real place."""
    parts = path.strip("/").split("/")
    current = ""
    for part in parts:
        current += "/" + part
        if os.path.islink(current):
            entries.setdefault(current, ["l", os.readlink(current)])
            current = os.path.realpath(current)
    if os.path.isfile(current) and current not in entries:
        text = read_text(current)
        if text is not None:
            entries[current] = ["f", text]


def tree(globs: list[str]) -> list[list[str]]:
    entries = {}  # type: dict[str, list[str]]
    for pattern in globs:
        for path in sorted(glob.glob(pattern)):
            tree_entry(path, entries)
    return [[path, *entry] for path, entry in sorted(entries.items())]


def sampler(interval: float, offset: float, stop: threading.Event) -> None:
    while True:
        local = time.time() - offset
        wait = (math.floor(local / interval) + 1) * interval - local
        if stop.wait(wait):
            return
        paths = list(sampling["paths"])
        wall, mono = time.time(), time.monotonic()
        send({"tick": {"wall": wall, "mono": mono, "files": read_files(paths)}})


def start_sampling(request: Any) -> dict[str, Any]:
    stop = threading.Event()
    old = sampling["stop"]
    old.set()
    sampling.update(paths=list(request["paths"]), stop=stop)
    interval, offset = float(request["interval"]), float(request["offset"])
    threading.Thread(target=sampler, args=(interval, offset, stop), daemon=True).start()
    return {}


def stop_sampling(request: Any) -> dict[str, Any]:
    sampling["stop"].set()
    return {}


def resolve(request: Any) -> dict[str, Any]:
    found = [os.path.realpath(p) if os.path.exists(p) else None for p in request["paths"]]
    return {"paths": found}


def listing(request: Any) -> dict[str, Any]:
    return {"paths": sorted(glob.glob(request["glob"]))}


def watch(request: Any) -> dict[str, Any]:
    path = "/proc/%d/stat" % int(request["pid"])
    sampling["paths"] = [*sampling["paths"], path]
    return {}


def spawn(request: Any) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(request.get("env") or {})
    with open(str(request["stdout"]), "wb") as out, open(str(request["stderr"]), "wb") as err:
        child = subprocess.Popen(  # an argv list, no shell
            list(request["argv"]),
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
            cwd=str(request.get("cwd") or os.getcwd()), start_new_session=True,
        )  # fmt: skip
    children[child.pid] = child
    return {"pid": child.pid}


def wait(request: Any) -> dict[str, Any]:
    child = children[int(request["pid"])]
    try:
        code = (
            child.wait(float(request.get("timeout") or 0))
            if request.get("timeout")
            else child.poll()
        )
    except subprocess.TimeoutExpired:
        code = None
    return {"code": code}


def kill(request: Any) -> dict[str, Any]:
    child = children.get(int(request["pid"]))
    if child is not None and child.poll() is None:
        child.send_signal(int(request.get("signal") or signal.SIGTERM))
    return {}


def run(request: Any) -> dict[str, Any]:
    try:
        done = subprocess.run(  # an argv list, no shell
            list(request["argv"]), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=float(request.get("timeout") or 30),
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"code": None, "stdout": "", "stderr": str(exc)}
    out, err = (s.decode("utf-8", "replace") for s in (done.stdout, done.stderr))
    return {"code": done.returncode, "stdout": out, "stderr": err}


def which(request: Any) -> dict[str, Any]:
    found = []
    for name in request.get("names") or []:
        path = shutil.which(name)
        if path and path not in found:
            found.append(path)
    for pattern in request.get("globs") or []:
        for path in sorted(glob.glob(pattern)):
            if os.access(path, os.X_OK) and path not in found:
                found.append(path)
    return {"found": found}


OPS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "clock": lambda request: {"wall": time.time(), "mono": time.monotonic()},
    "read": lambda request: {"mono": time.monotonic(), "files": read_files(request["paths"])},
    "tree": lambda request: {"entries": tree(request["globs"])},
    "sample": start_sampling,
    "stop_sampling": stop_sampling,
    "list": listing,
    "resolve": resolve,
    "watch": watch,
    "spawn": spawn,
    "wait": wait,
    "kill": kill,
    "run": run,
    "which": which,
}


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = OPS[request["op"]](request)
        except Exception as exc:  # one request failed: say so; the agent goes on
            answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
        answer["id"] = request.get("id")
        send(answer)


def clean_up(directory: str) -> None:
    sampling["stop"].set()
    for child in children.values():
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.kill()
    shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    directory = os.path.dirname(os.path.abspath(__file__))
    os.chdir(directory)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the session's end is stdin's end
    send({"ready": {"pid": os.getpid(), "python": sys.version.split()[0]}})
    try:
        serve()
    finally:
        clean_up(directory)


if __name__ == "__main__":
    main()
