"""A small headless-Chromium driver for tests, on Playwright and the system's Chromium.

Tests open a page (usually a self-contained HTML report written to a temporary directory) in a
real headless Chromium, then check what a person would see::

    with chromium() as browser:
        page = browser.open(report_path, wait_for="window.reportReady === true")
        assert page.console_errors == []
        assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 3
        page.screenshot(ARTIFACTS / "report.png")

Playwright (`playwright.sync_api`) speaks the DevTools protocol; it launches the Chromium found
on PATH (Debian's package) through `executable_path`, so no browser is ever downloaded
(`playwright install` is not needed). This module adds what the tests rely on:

- `chromium()` gives the browser a throwaway profile and home directory and, whatever happens in
  the block, closes it, ends any process it left behind and removes the directory;
- `Page` collects, from before the navigation on, `console_errors` (`console.error` calls,
  failed `console.assert`s, uncaught exceptions and unhandled promise rejections, and the
  browser's own error entries such as a resource that failed to load) and `requests` (the URL
  of every request the page made, the page itself included, so a test can assert that a
  self-contained file loaded nothing from the network);
- `Page.evaluate` and `Page.wait_for` have timeouts, and an exception thrown by the page's
  JavaScript (`JavaScriptError`) is told apart from a failure of the browser (`BrowserError`).

Chromium resolves no host name (`--host-resolver-rules`): a page that reaches for the network
fails at once and deterministically, whatever the machine's network, and the attempt is still
listed in `requests` and `console_errors`. Use a `127.0.0.1` URL to reach a local server.

One thread at a time (Playwright's sync API): events are taken in while a method of `Page` runs,
and whenever `console_errors` or `requests` is read.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, ConsoleMessage, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page as PlaywrightPage
from playwright.sync_api import TimeoutError as PlaywrightTimeout

BINARIES = ("chromium", "chromium-browser", "google-chrome")
# On top of Playwright's own switches (headless, no sandbox, no first-run, no extensions...).
FLAGS = (
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often have a 64 MB /dev/shm: use /tmp
    "--force-device-scale-factor=1",
    "--hide-scrollbars",
    "--mute-audio",
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
)
# Each page's viewport, in CSS pixels at scale 1.
VIEWPORT = (1400, 1000)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

# Runs `source` in the page's global scope (indirect eval: statements allowed, the last value
# returned), awaits a promise, and gives up after `ms` milliseconds; Playwright's own evaluate
# would wait forever for a promise that never settles. A throw is caught here, so that a
# Playwright error can only mean that the browser or the page failed.
_EVALUATE = """async ([source, ms]) => {
  let timer;
  const late = new Promise(resolve => { timer = setTimeout(resolve, ms, {settled: false}); });
  const run = (async () => {
    try {
      return {settled: true, value: await globalThis.eval(source)};
    } catch (e) {
      const text = e instanceof Error ? String(e) : typeof e === "string" ? e : JSON.stringify(e);
      return {settled: true, thrown: text ?? String(e)};
    }
  })();
  try {
    return await Promise.race([run, late]);
  } finally {
    clearTimeout(timer);
  }
}"""


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
    """Start a headless Chromium; on leaving the block, end it and remove its profile.

    `args` are extra command-line switches, after the defaults in `FLAGS`.
    """
    binary = find_chromium()
    home = Path(tempfile.mkdtemp(prefix="pgdyno-chromium-"))
    profile = home / "profile"
    # Chromium also writes under ~/.config and ~/.cache: keep that in the throwaway directory.
    env: dict[str, str | float | bool] = {**os.environ, "HOME": str(home)}
    env |= {"XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    pid: int | None = None
    session: int | None = None
    try:
        with _playwright() as playwright:
            try:
                context = playwright.chromium.launch_persistent_context(
                    profile,
                    executable_path=binary,
                    headless=True,
                    args=[*FLAGS, *args],
                    env=env,
                    timeout=startup_timeout * 1000,
                    viewport={"width": VIEWPORT[0], "height": VIEWPORT[1]},
                    device_scale_factor=1,
                )
            except PlaywrightError as error:
                raise BrowserError(f"Chromium ({binary}) did not start: {error.message}") from error
            pid = _browser_pid(profile)
            # Playwright starts it in a session of its own, which then holds only Chromium.
            session = pid if os.getsid(pid) == pid else None
            browser = Browser(context, pid, profile)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if pid is not None:
            _end_leftovers(session, home)
        shutil.rmtree(home, ignore_errors=True)


_shared: list[Playwright] = []  # the one Playwright driver, while any `chromium()` block runs
_users = 0


@contextmanager
def _playwright() -> Iterator[Playwright]:
    """Playwright's driver, shared by nested `chromium()` blocks (a test may open a second
    browser while a fixture's is running) and stopped when the last one ends."""
    global _users
    if not _shared:
        _shared.append(sync_playwright().start())
    _users += 1
    try:
        yield _shared[0]
    finally:
        _users -= 1
        if _users == 0:
            _shared.pop().stop()


class Browser:
    """A running Chromium; make one with `chromium()`."""

    def __init__(self, context: BrowserContext, pid: int, profile_dir: Path) -> None:
        self.pid = pid
        self.profile_dir = profile_dir
        self._context = context
        self._pages: list[Page] = []
        self._closed = False

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
        try:
            tab = self._context.new_page()
        except PlaywrightError as error:
            raise BrowserError(f"cannot open a new tab: {error.message}") from error
        page = Page(self, tab)
        self._pages.append(page)
        try:
            page._navigate(url, deadline)
            if wait_for is not None:
                page._wait_for(wait_for, deadline, timeout, interval=0.05)
        except BaseException:
            page.close()
            raise
        return page

    def tab_count(self) -> int:
        """How many tabs the browser has open now."""
        return len(self._context.pages)

    def close(self) -> None:
        """Close every page, then the browser (`chromium()` does this)."""
        for page in self._pages:
            page.close()
        self._pages.clear()
        if not self._closed:
            self._closed = True
            with suppress(PlaywrightError):
                self._context.close()


class Page:
    """One tab, from `Browser.open`."""

    def __init__(self, browser: Browser, page: PlaywrightPage) -> None:
        self.browser = browser
        self.url = "about:blank"
        self.closed = False
        self._page = page
        self._console_errors: list[str] = []
        self._requests: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)
        page.on("request", lambda request: self._requests.append(request.url))

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
        int. Raises JavaScriptError if the expression throws or the promise rejects, and
        WaitTimeout if it has not settled within `timeout` seconds.
        """
        return self._evaluate(expression, time.monotonic() + timeout, repr(expression))

    def wait_for(self, expression: str, *, timeout: float = 30, interval: float = 0.05) -> None:
        """Wait until a JavaScript expression is truthy (after awaiting it, if it is a promise).

        Evaluated every `interval` seconds; an evaluation that throws counts as not yet. Past
        `timeout`, raises WaitTimeout with the console errors so far and the last exception.
        """
        self._wait_for(expression, time.monotonic() + timeout, timeout, interval)

    def screenshot(self, path: Path, *, full_page: bool = True) -> None:
        """Save a PNG of the page: all of it by default, else the viewport (`VIEWPORT`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._page.screenshot(path=path, full_page=full_page, type="png", timeout=60_000)
        except PlaywrightError as error:
            raise BrowserError(f"screenshot of {self.url}: {error.message}") from error

    def close(self) -> None:
        """Close the tab (the browser keeps running)."""
        if self.closed:
            return
        self.closed = True
        with suppress(PlaywrightError):
            self._page.close()

    def _navigate(self, url: str, deadline: float) -> None:
        self.url = url
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            self._page.goto(url, wait_until="load", timeout=remaining * 1000)
        except PlaywrightTimeout as error:
            raise self._timeout(f"the load event of {url}") from error
        except PlaywrightError as error:
            raise BrowserError(f"cannot open {url}: {error.message}") from error

    def _evaluate(self, expression: str, deadline: float, shown_as: str) -> Any:
        if self.closed:
            raise BrowserError(f"evaluate {shown_as}: the page is closed")
        ms = max(deadline - time.monotonic(), 0.0) * 1000
        try:
            answer = self._page.evaluate(_EVALUATE, [expression, ms])
        except PlaywrightError as error:
            raise BrowserError(f"evaluate {shown_as} on {self.url}: {error.message}") from error
        if not answer["settled"]:
            raise self._timeout(f"{shown_as} to settle")
        if "thrown" in answer:
            raise JavaScriptError(f"{shown_as} threw: {answer['thrown']}")
        return answer.get("value")

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

    def _timeout(self, what: str) -> WaitTimeout:
        errors = list(self._console_errors)
        listed = "; ".join(errors) if errors else "none"
        return WaitTimeout(
            f"timed out waiting for {what} on {self.url}; console errors: {listed}", errors
        )

    def _pump(self) -> None:
        """Take in the events that have already arrived, without waiting for more.

        Playwright's sync API delivers events only while a call is in flight: a zero wait is
        a round trip to the driver that does nothing else.
        """
        if not self.closed:
            with suppress(PlaywrightError):
                self._page.wait_for_timeout(0)

    def _on_console(self, message: ConsoleMessage) -> None:
        kind = message.type
        if kind not in ("error", "assert"):
            return
        text = message.text
        if kind == "assert":
            text = "Assertion failed" + (f": {text}" if text else "")
        where = message.location
        # A resource that failed to load: the text does not name it, its location does.
        shown = "" if where.get("url", "") in text else _location(where)
        self._console_errors.append(f"console.{kind}: {text}{shown}")

    def _on_page_error(self, error: PlaywrightError) -> None:
        # Uncaught exceptions and unhandled promise rejections; the stack starts "Error: ...".
        self._console_errors.append(f"Uncaught {error.stack or f'{error.name}: {error.message}'}")


def _browser_pid(profile: Path) -> int:
    """The browser process: the one with our profile whose parent (Playwright's driver) has not.

    Chromium's own helpers (zygote, renderers, GPU process) carry the profile switch too.
    """
    flag = f"--user-data-dir={profile}".encode()
    ours = {}
    for proc in Path("/proc").glob("[0-9]*"):
        with suppress(OSError, ValueError, IndexError):
            if flag in (proc / "cmdline").read_bytes().split(b"\0"):
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                ours[int(proc.name)] = ppid
    roots = [pid for pid, ppid in ours.items() if ppid not in ours]
    if len(roots) != 1:
        raise BrowserError(f"cannot tell Chromium's browser process among {sorted(ours)}")
    return roots[0]


def _end_leftovers(session: int | None, home: Path, timeout: float = 5.0) -> None:
    """End any process Chromium left behind, even one that left its session.

    Playwright closes the browser; the chrome_crashpad_handler processes start sessions of
    their own, with a database under XDG_CONFIG_HOME, which is in `home`.
    """
    deadline = time.monotonic() + timeout
    while (left := leftover_processes(session, home)) and time.monotonic() < deadline:
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def leftover_processes(session: int | None, home: Path) -> list[int]:
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


def _as_url(url_or_path: str | Path) -> str:
    if isinstance(url_or_path, str) and _SCHEME.match(url_or_path):
        return url_or_path
    path = Path(url_or_path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file to open in Chromium: {path}")
    return path.as_uri()


def _location(where: Any) -> str:
    url = where.get("url")
    if not url:
        return ""
    # Chromium numbers lines and columns from 0.
    return f" ({url}:{where.get('lineNumber', 0) + 1}:{where.get('columnNumber', 0) + 1})"
