"""A small headless-Chromium driver for tests, over the Chrome DevTools Protocol (CDP).

Tests open a page (usually a self-contained HTML report written to a temporary directory) in a
real headless Chromium, then check what a person would see::

    with chromium() as browser:
        page = browser.open(report_path, wait_for="window.reportReady === true")
        assert page.console_errors == []
        assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 3
        page.screenshot(ARTIFACTS / "report.png")

`chromium()` starts the browser in its own process group with a throwaway profile directory and,
whatever happens in the block, ends the whole group and removes the directory. Each
`Browser.open` gets a new tab; `Page` collects, from before the navigation on:

- `console_errors`: `console.error` calls, failed `console.assert`s, uncaught exceptions and
  unhandled promise rejections, and the browser's own error log entries (a resource that failed
  to load, a blocked request, ...);
- `requests`: the URL of every request the page made, the page itself included, so a test can
  assert that a self-contained file loaded nothing from the network.

Chromium resolves no host name (`--host-resolver-rules`): a page that reaches for the network
fails at once and deterministically, whatever the machine's network, and the attempt is still
listed in `requests` and `console_errors`. Use a `127.0.0.1` URL to reach a local server.

One thread at a time: a `Page` reads its CDP connection only while one of its methods runs (and
whenever `console_errors` or `requests` is read, it first takes in what has already arrived).
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import websocket

BINARIES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",  # needed as root; the page is our own test file
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-dev-shm-usage",  # containers often have a 64 MB /dev/shm: use /tmp
    "--force-device-scale-factor=1",
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    "--remote-debugging-port=0",
    "--window-size=1400,1000",
)
# Each page's viewport, in CSS pixels at scale 1. Set by emulation: headless Chromium takes room
# for a (hidden) toolbar out of --window-size, which left 1400×857 of a 1400×1000 window.
VIEWPORT = (1400, 1000)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class BrowserError(RuntimeError):
    """Chromium could not be found or started, or did not answer as it should."""


class JavaScriptError(BrowserError):
    """An expression given to `Page.evaluate` threw (or returned a promise that rejected)."""


class WaitTimeout(BrowserError):
    """A page did not load, or a `wait_for` expression did not become truthy, in time."""

    def __init__(self, message: str, console_errors: list[str]) -> None:
        super().__init__(message)
        self.console_errors = console_errors


def find_chromium() -> str:
    """The path of the Chromium (or Chrome) binary on PATH, or a BrowserError saying what to do."""
    for name in BINARIES:
        if found := shutil.which(name):
            return found
    raise BrowserError(
        f"no Chromium found on PATH (looked for {', '.join(BINARIES)}): run `scripts/bootstrap dev`"
        " as root, or `apt-get install chromium fonts-dejavu-core`"
    )


@contextmanager
def chromium(*, startup_timeout: float = 30.0, args: Sequence[str] = ()) -> Iterator[Browser]:
    """Start a headless Chromium; on leaving the block, end its process group and profile.

    `args` are extra command-line switches, after the defaults in `FLAGS`.
    """
    binary = find_chromium()
    home = Path(tempfile.mkdtemp(prefix="pgdyno-chromium-"))
    profile = home / "profile"
    profile.mkdir()
    log_path = home / "chromium.log"
    command = [binary, *FLAGS, f"--user-data-dir={profile}", *args, "about:blank"]
    # Chromium also writes under ~/.config and ~/.cache: keep that in the throwaway directory.
    env = {**os.environ, "HOME": str(home)}
    env |= {"XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    process: subprocess.Popen[bytes] | None = None
    browser: Browser | None = None
    try:
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group (and session): killed as one
            )
        port, path = _devtools_address(process, profile, log_path, startup_timeout)
        browser = Browser(process.pid, profile, port, path)
        yield browser
    finally:
        if browser is not None:
            browser.close()
        if process is not None:
            _terminate(process, home)
        shutil.rmtree(home, ignore_errors=True)


class Browser:
    """A running Chromium; make one with `chromium()`."""

    def __init__(self, pid: int, profile_dir: Path, port: int, path: str) -> None:
        self.pid = pid
        self.profile_dir = profile_dir
        self.port = port
        # The browser-wide DevTools endpoint; pages have their own, from /json/list.
        self.websocket_url = f"ws://127.0.0.1:{port}{path}"
        self._pages: list[Page] = []

    def open(
        self, url_or_path: str | Path, *, wait_for: str | None = None, timeout: float = 30
    ) -> Page:
        """Open a URL, or a local file's path, in a new tab and wait for its load event.

        With `wait_for`, a JavaScript expression, also wait until it is truthy (see
        `Page.wait_for`). `timeout` (seconds) covers loading and waiting together; past it,
        WaitTimeout says what was awaited and lists the console errors so far.
        """
        deadline = time.monotonic() + timeout
        url = _as_url(url_or_path)
        self._pages = [page for page in self._pages if not page.closed]
        target = self._new_target()
        page = Page(self, str(target["id"]), str(target["webSocketDebuggerUrl"]))
        self._pages.append(page)
        try:
            page._navigate(url, deadline)
            if wait_for is not None:
                page._wait_for(wait_for, deadline, timeout, interval=0.05)
        except BaseException:
            page.close()
            raise
        return page

    def close(self) -> None:
        """Close every page (`chromium()` does this, then ends the process)."""
        for page in self._pages:
            page.close()
        self._pages.clear()

    def _http(self, method: str, path: str) -> str:
        """A request to the DevTools HTTP endpoint, which answers JSON or a line of text."""
        # No proxy from the environment for the browser's own endpoint.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with opener.open(request, timeout=10) as response:
                return str(response.read().decode())
        except OSError as error:
            raise BrowserError(f"DevTools {method} {path}: {error}") from error

    def _new_target(self) -> dict[str, Any]:
        """A tab of our own: the one Chromium opened at start (about:blank), then new ones."""
        used = {page.target_id for page in self._pages}
        for target in json.loads(self._http("GET", "/json/list")):
            if target.get("type") == "page" and target["id"] not in used:
                return dict(target)
        return dict(json.loads(self._http("PUT", "/json/new?about:blank")))


class Page:
    """One tab, from `Browser.open`."""

    def __init__(self, browser: Browser, target_id: str, ws_url: str) -> None:
        self.browser = browser
        self.target_id = target_id
        self.url = "about:blank"
        self._console_errors: list[str] = []
        self._requests: list[str] = []
        self._next_id = 0
        self.closed = False
        try:
            # Chromium refuses WebSocket handshakes with an Origin header it does not allow.
            self._ws = websocket.create_connection(ws_url, timeout=10, suppress_origin=True)
        except (OSError, websocket.WebSocketException) as error:
            raise BrowserError(f"cannot connect to the page at {ws_url}: {error}") from error
        deadline = time.monotonic() + 10
        for domain in ("Runtime", "Log", "Page", "Network"):
            self._call(f"{domain}.enable", {}, deadline)
        self._call("Page.setLifecycleEventsEnabled", {"enabled": True}, deadline)
        width, height = VIEWPORT
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self._call("Emulation.setDeviceMetricsOverride", metrics, deadline)

    @property
    def console_errors(self) -> list[str]:
        """Console errors, failed assertions, uncaught exceptions and error log entries so far."""
        self._pump()
        return list(self._console_errors)

    @property
    def requests(self) -> list[str]:
        """The URL of each request the page made so far, in order (the page's own included)."""
        self._pump()
        return list(self._requests)

    def evaluate(self, expression: str, *, timeout: float = 30) -> Any:
        """The value of a JavaScript expression, as JSON-like Python data.

        A promise is awaited. `undefined` is None, NaN and ±Infinity are floats, a BigInt is an
        int, and an object that is not JSON (a DOM node, a function) comes back as {} or None.
        Raises JavaScriptError if the expression throws or the promise rejects.
        """
        return self._evaluate(expression, time.monotonic() + timeout, repr(expression))

    def wait_for(self, expression: str, *, timeout: float = 30, interval: float = 0.05) -> None:
        """Wait until a JavaScript expression is truthy (after awaiting it, if it is a promise).

        Evaluated every `interval` seconds; an evaluation that throws counts as not yet. Past
        `timeout`, raises WaitTimeout with the console errors so far and the last exception.
        """
        self._wait_for(expression, time.monotonic() + timeout, timeout, interval)

    def _evaluate(self, expression: str, deadline: float, shown_as: str) -> Any:
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        answer = self._call("Runtime.evaluate", params, deadline)
        if details := answer.get("exceptionDetails"):
            raise JavaScriptError(f"{shown_as} threw: {_exception_text(details)}")
        return _value(answer.get("result", {}))

    def _wait_for(self, expression: str, deadline: float, timeout: float, interval: float) -> None:
        check = f"(async () => !!(await (\n{expression}\n)))()"
        problem = ""
        while True:
            try:
                if self._evaluate(check, max(deadline, time.monotonic() + 0.1), "it"):
                    return
                problem = ""
            except JavaScriptError as error:
                problem = f"; the last evaluation: {error}"
            except WaitTimeout:
                problem = "; the last evaluation did not finish (a promise that never settles?)"
            if time.monotonic() >= deadline:
                break
            time.sleep(max(min(interval, deadline - time.monotonic()), 0))
        errors = self.console_errors
        message = f"{expression!r} was not true within {timeout:g} s on {self.url}{problem}"
        message += "; console errors: " + ("; ".join(errors) if errors else "none")
        raise WaitTimeout(message, errors)

    def screenshot(self, path: Path, *, full_page: bool = True) -> None:
        """Save a PNG of the page: all of it by default, else the viewport (`VIEWPORT`)."""
        deadline = time.monotonic() + 60
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self._call("Page.getLayoutMetrics", {}, deadline)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": math.ceil(size["width"]),
                "height": math.ceil(size["height"]),
                "scale": 1,
            }
        answer = self._call("Page.captureScreenshot", params, deadline)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(answer["data"]))

    def close(self) -> None:
        """Close the tab and its connection (the browser keeps running)."""
        if self.closed:
            return
        self.closed = True
        with suppress(OSError, websocket.WebSocketException):
            self._ws.close()
        with suppress(BrowserError):
            self.browser._http("GET", f"/json/close/{self.target_id}")

    # CDP plumbing: send a command, read messages until its answer, record events on the way.

    def _navigate(self, url: str, deadline: float) -> None:
        self.url = url
        answer = self._call("Page.navigate", {"url": url}, deadline)
        if error := answer.get("errorText"):
            raise BrowserError(f"cannot open {url}: {error}")
        frame, loader = answer["frameId"], answer.get("loaderId")

        def loaded(message: dict[str, Any]) -> bool:
            params = message.get("params", {})
            if loader is None:  # a same-document navigation: no new load
                return True
            return (
                message.get("method") == "Page.lifecycleEvent"
                and params.get("name") == "load"
                and params.get("frameId") == frame
                and params.get("loaderId") == loader
            )

        if loader is not None:
            self._read_until(loaded, deadline, f"the load event of {url}")

    def _call(self, method: str, params: dict[str, Any], deadline: float) -> dict[str, Any]:
        if self.closed:
            raise BrowserError(f"{method}: the page is closed")
        self._next_id += 1
        message_id = self._next_id
        try:
            self._ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        except (OSError, websocket.WebSocketException) as error:
            raise BrowserError(f"{method}: lost the connection to Chromium: {error}") from error
        answer = self._read_until(lambda m: m.get("id") == message_id, deadline, method)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message', answer['error'])}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def _read_until(
        self, wanted: Callable[[dict[str, Any]], bool], deadline: float, what: str
    ) -> dict[str, Any]:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(what)
            message = self._receive(remaining, what)
            if "method" in message:
                self._record(message["method"], message.get("params", {}))
            if wanted(message):
                return message

    def _receive(self, timeout: float, what: str) -> dict[str, Any]:
        self._ws.settimeout(timeout)
        try:
            raw = self._ws.recv()
        except websocket.WebSocketTimeoutException as error:
            raise self._timeout(what) from error
        except (OSError, websocket.WebSocketException) as error:
            raise BrowserError(f"{what}: lost the connection to Chromium: {error}") from error
        message: dict[str, Any] = json.loads(raw)
        return message

    def _timeout(self, what: str) -> WaitTimeout:
        errors = list(self._console_errors)
        listed = "; ".join(errors) if errors else "none"
        return WaitTimeout(
            f"timed out waiting for {what} on {self.url}; console errors: {listed}", errors
        )

    def _pump(self) -> None:
        """Take in the messages that have already arrived, without waiting for more."""
        if self.closed:
            return
        sock = self._ws.sock
        while sock is not None and select.select([sock], [], [], 0)[0]:
            message = self._receive(10, "reading events")
            if "method" in message:
                self._record(message["method"], message.get("params", {}))

    def _record(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(_describe(arg) for arg in params.get("args", []))
            if params["type"] == "assert":
                text = "Assertion failed" + (f": {text}" if text else "")
            frames = params.get("stackTrace", {}).get("callFrames", [])
            where = _location(frames[0]) if frames else ""
            self._console_errors.append(f"console.{params['type']}: {text}{where}")
        elif method == "Runtime.exceptionThrown":
            self._console_errors.append(_exception_text(params["exceptionDetails"]))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            url = entry.get("url")
            suffix = f" ({url})" if url and url not in entry.get("text", "") else ""
            self._console_errors.append(f"{entry.get('source', 'log')}: {entry['text']}{suffix}")
        elif method == "Network.requestWillBeSent":
            self._requests.append(params["request"]["url"])


def _devtools_address(
    process: subprocess.Popen[bytes], profile: Path, log_path: Path, timeout: float
) -> tuple[int, str]:
    """Port and path of the DevTools endpoint, from the DevToolsActivePort file Chromium writes."""
    deadline = time.monotonic() + timeout
    active_port = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrowserError(
                f"Chromium exited with status {process.returncode} at start; its output ends:\n"
                + _tail(log_path)
            )
        with suppress(FileNotFoundError):
            lines = active_port.read_text().splitlines()
            if len(lines) >= 2 and lines[0].strip().isdigit():
                return int(lines[0]), lines[1].strip()
        time.sleep(0.05)
    raise BrowserError(
        f"Chromium did not write {active_port} in time; its output ends:\n" + _tail(log_path)
    )


def _terminate(process: subprocess.Popen[bytes], home: Path) -> None:
    """End Chromium and every process it started, even those that left its process group.

    SIGTERM to the browser process first: it then ends and reaps its own children. Then SIGKILL
    to its process group, and to any process left in its session or naming its directory (the
    chrome_crashpad_handler processes start sessions of their own, with a database under
    XDG_CONFIG_HOME, which is in `home`).
    """
    process.terminate()
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for pid in leftover_processes(process.pid, home):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def leftover_processes(session: int, home: Path) -> list[int]:
    """Live processes (not zombies) in a session, or with a path under `home` in their command."""
    found = []
    needle = str(home).encode()
    for proc in Path("/proc").glob("[0-9]*"):
        with suppress(OSError, ValueError, IndexError):
            # The command name (field 2) may hold spaces and parentheses: split after it.
            state, _ppid, _pgrp, sid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:4]
            if state != "Z" and (int(sid) == session or needle in (proc / "cmdline").read_bytes()):
                found.append(int(proc.name))
    return found


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def _as_url(url_or_path: str | Path) -> str:
    if isinstance(url_or_path, str) and _SCHEME.match(url_or_path):
        return url_or_path
    path = Path(url_or_path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file to open in Chromium: {path}")
    return path.as_uri()


def _value(remote: dict[str, Any]) -> Any:
    """A CDP RemoteObject evaluated with returnByValue, as Python data."""
    if "value" in remote:
        return remote["value"]
    special = remote.get("unserializableValue")
    if special is None:
        return None  # undefined, or a value that has no JSON form
    if special.endswith("n"):  # BigInt
        return int(special[:-1])
    return float(special)  # "NaN", "Infinity", "-Infinity", "-0"


def _describe(arg: dict[str, Any]) -> str:
    """A console argument (CDP RemoteObject) as the console would show it: {code: 7}, [1, 2]."""
    if "value" in arg:
        value = arg["value"]
        return value if isinstance(value, str) else json.dumps(value)
    preview = arg.get("preview")
    if preview and preview.get("type") == "object" and preview.get("subtype") != "error":
        array = preview.get("subtype") == "array"
        items = [
            str(item.get("value", item.get("type")))
            if array
            else f"{item['name']}: {item.get('value', item.get('type'))}"
            for item in preview.get("properties", [])
        ]
        if preview.get("overflow"):
            items.append("…")
        return ("[{}]" if array else "{{{}}}").format(", ".join(items))
    return str(arg.get("unserializableValue") or arg.get("description") or arg.get("type", "?"))


def _exception_text(details: dict[str, Any]) -> str:
    """From CDP ExceptionDetails: 'Uncaught Error: boom' and the stack, or where it was thrown."""
    text = details.get("text", "Uncaught")
    exception = details.get("exception")
    description = (exception.get("description") or _describe(exception)) if exception else ""
    message = f"{text} {description}" if description else text
    if "\n" not in message and details.get("url"):
        message += _location(details)
    return message


def _location(where: dict[str, Any]) -> str:
    url = where.get("url")
    if not url:
        return ""
    # CDP numbers lines and columns from 0.
    return f" ({url}:{where.get('lineNumber', 0) + 1}:{where.get('columnNumber', 0) + 1})"
