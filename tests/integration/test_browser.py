"""The headless-Chromium test driver (tests/browser.py) against a real Chromium."""

from __future__ import annotations

import base64
import json
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser import (
    VIEWPORT,
    Browser,
    BrowserError,
    JavaScriptError,
    WaitTimeout,
    chromium,
    leftover_processes,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as running:
        yield running


def write_page(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(
        f"<!doctype html>\n<html><head><meta charset='utf-8'></head>\n{body}\n</html>\n"
    )
    return path


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking that it is a PNG at all."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def png_pixels(browser: Browser, png: bytes, points: list[tuple[int, int]]) -> list[str]:
    """The colours ("#rrggbb") at (x, y) points of a PNG, decoded by the browser in a canvas."""
    page = browser.open("about:blank")
    encoded = base64.b64encode(png).decode()
    colours = list(
        page.evaluate(
            f"""(async () => {{
                const image = new Image();
                image.src = "data:image/png;base64,{encoded}";
                await image.decode();
                const canvas = document.createElement("canvas");
                [canvas.width, canvas.height] = [image.width, image.height];
                const context = canvas.getContext("2d");
                context.drawImage(image, 0, 0);
                return {json.dumps(points)}.map(([x, y]) => "#" + Array.from(
                    context.getImageData(x, y, 1, 1).data.slice(0, 3),
                    v => v.toString(16).padStart(2, "0")).join(""));
            }})()"""
        )
    )
    page.close()
    return colours


def test_console_errors_and_uncaught_exceptions_are_reported(browser: Browser, tmp_path: Path):
    page = browser.open(
        write_page(
            tmp_path,
            "errors.html",
            """<body><p>errors</p><script>
            console.log("just a log line");
            console.warn("just a warning");
            console.error("boom from console.error", {code: 7});
            console.assert(1 === 2, "one is not two");
            console.assert(true, "this assertion holds");
            Promise.reject(new Error("rejected promise"));
            throw new Error("kaboom uncaught");
            </script></body>""",
        ),
        wait_for="document.readyState === 'complete'",
    )
    errors = page.console_errors
    assert len(errors) == 4, errors
    assert any("boom from console.error {code: 7}" in e for e in errors), errors
    assert any("Assertion failed: one is not two" in e for e in errors), errors
    assert any("kaboom uncaught" in e and "Uncaught" in e for e in errors), errors
    assert any("rejected promise" in e for e in errors), errors
    assert not any("just a" in e or "assertion holds" in e for e in errors), errors


def test_a_clean_page_reports_no_errors(browser: Browser, tmp_path: Path):
    page = browser.open(
        write_page(
            tmp_path,
            "clean.html",
            "<title>clean</title><body><p id='p'>fine</p>"
            "<script>console.log('all good'); console.info('still good');</script></body>",
        )
    )
    assert page.evaluate("document.title") == "clean"
    assert page.evaluate("document.getElementById('p').textContent") == "fine"
    assert page.console_errors == []
    assert page.requests == [page.url]
    assert page.url.startswith("file://") and page.url.endswith("/clean.html")


def test_errors_after_load_are_collected(browser: Browser, tmp_path: Path):
    page = browser.open(write_page(tmp_path, "later.html", "<body>later</body>"))
    assert page.console_errors == []
    page.evaluate("setTimeout(() => { throw new Error('thrown later'); }, 0); 1")
    page.wait_for("new Promise(resolve => setTimeout(() => resolve(true), 50))")
    assert any("thrown later" in e for e in page.console_errors)
    # Reading console_errors alone takes in what arrived since the last call.
    page.evaluate("setTimeout(() => console.error('logged later'), 0); 1")
    deadline = time.monotonic() + 10
    while not any("logged later" in e for e in page.console_errors):
        assert time.monotonic() < deadline, page.console_errors
        time.sleep(0.02)


def test_evaluate_returns_values(browser: Browser, tmp_path: Path):
    page = browser.open(
        write_page(
            tmp_path, "values.html", "<body><div class='c'></div><div class='c'></div></body>"
        )
    )
    assert page.evaluate("1 + 2") == 3
    assert page.evaluate("0.25 * 2") == 0.5
    assert page.evaluate("'a' + 'b'") == "ab"
    assert page.evaluate("document.querySelectorAll('.c').length") == 2
    assert page.evaluate("({n: 1, list: [1, 'two', null], nested: {ok: true}})") == {
        "n": 1,
        "list": [1, "two", None],
        "nested": {"ok": True},
    }
    assert page.evaluate("[1, 2, 3].map(x => x * x)") == [1, 4, 9]
    assert page.evaluate("undefined") is None
    assert page.evaluate("null") is None
    assert page.evaluate("1 / 0") == float("inf")
    assert page.evaluate("2n ** 70n") == 2**70
    # A promise is awaited.
    assert page.evaluate("new Promise(resolve => setTimeout(() => resolve({late: 42}), 20))") == {
        "late": 42
    }
    with pytest.raises(JavaScriptError, match="nope"):
        page.evaluate("(() => { throw new Error('nope'); })()")
    with pytest.raises(JavaScriptError, match="noSuchVariable"):
        page.evaluate("noSuchVariable + 1")
    with pytest.raises(JavaScriptError, match="refused"):
        page.evaluate("Promise.reject(new Error('refused'))")
    # Thrown by our own evaluations: not the page's errors.
    assert page.console_errors == []


def test_wait_for_waits_until_the_page_is_ready(browser: Browser, tmp_path: Path):
    page = browser.open(
        write_page(
            tmp_path,
            "ready.html",
            "<body><script>setTimeout(() => { window.reportReady = true; }, 300);</script></body>",
        ),
        wait_for="window.reportReady === true",
    )
    assert page.evaluate("window.reportReady") is True


def test_wait_for_times_out_with_a_clear_error(browser: Browser, tmp_path: Path):
    path = write_page(
        tmp_path,
        "never.html",
        "<body><script>console.error('chart data missing');</script></body>",
    )
    # Loaded first with the default deadline: a busy CI host has taken over a second to load
    # even this page, and the wait's own message is what is checked here.
    page = browser.open(path)
    with pytest.raises(WaitTimeout) as raised:
        page.wait_for("window.reportReady === true", timeout=1)
    message = str(raised.value)
    assert "window.reportReady === true" in message
    assert "was not true within 1 s" in message
    assert "chart data missing" in message
    assert any("chart data missing" in e for e in raised.value.console_errors)

    with pytest.raises(WaitTimeout, match=r"the last evaluation: it threw: .*notDefinedYet"):
        page.wait_for("notDefinedYet.ready", timeout=0.5)
    with pytest.raises(WaitTimeout, match="did not finish"):
        page.wait_for("new Promise(() => {})", timeout=0.5)
    # The page is still usable after both.
    assert page.evaluate("1 + 1") == 2


def test_open_that_times_out_closes_its_tab(browser: Browser, tmp_path: Path):
    path = write_page(tmp_path, "never2.html", "<body>never ready</body>")
    before = browser.tab_count()
    with pytest.raises(WaitTimeout, match=r"never2\.html"):
        # One deadline covers loading and waiting: whichever phase it ends in, the tab goes.
        browser.open(path, wait_for="window.reportReady === true", timeout=1)
    assert browser.tab_count() == before


def test_screenshot_is_a_png_of_the_page(browser: Browser, tmp_path: Path):
    page = browser.open(
        write_page(
            tmp_path,
            "tall.html",
            "<body style='margin:0; background:#fff'>"
            "<h1 style='font-family:sans-serif; margin:0; height:100px'>pgdyno screenshot</h1>"
            "<div style='height:3000px; background:#c33'></div>"
            "<div style='height:100px; background:#33c'></div></body>",
        )
    )
    assert page.evaluate("[innerWidth, innerHeight, devicePixelRatio]") == [*VIEWPORT, 1]
    assert page.evaluate("document.documentElement.scrollHeight") == 3200

    full = tmp_path / "shots" / "full.png"
    page.screenshot(full)
    data = full.read_bytes()
    assert png_size(data) == (VIEWPORT[0], 3200)
    # The heading's white background, the red block, the blue one at the end beyond the viewport.
    points = [(1399, 50), (0, 1000), (0, 3199)]
    assert png_pixels(browser, data, points) == ["#ffffff", "#cc3333", "#3333cc"]

    viewport = tmp_path / "viewport.png"
    page.screenshot(viewport, full_page=False)
    assert png_size(viewport.read_bytes()) == VIEWPORT


def test_requests_to_the_network_are_recorded(browser: Browser, tmp_path: Path):
    page = browser.open(
        write_page(
            tmp_path,
            "fetches.html",
            "<body><script src='http://example.invalid/x.js'"
            " onerror='window.scriptFailed = true'></script></body>",
        ),
        wait_for="window.scriptFailed === true",
    )
    assert page.requests == [page.url, "http://example.invalid/x.js"]
    # The failed load is also an error in the console, as it would be in DevTools.
    assert any("example.invalid/x.js" in e for e in page.console_errors), page.console_errors


def test_a_local_file_that_does_not_exist_is_refused(browser: Browser, tmp_path: Path):
    with pytest.raises(FileNotFoundError, match=r"missing\.html"):
        browser.open(tmp_path / "missing.html")


def test_the_browser_and_its_profile_are_gone_after_the_block(tmp_path: Path):
    page_path = write_page(tmp_path, "p.html", "<body>p</body>")
    with pytest.raises(RuntimeError, match="a failing test"), chromium() as running:
        pid, profile = running.pid, running.profile_dir
        assert profile.is_dir()
        assert os.getpgid(pid) == pid  # its own process group, killed as one
        running.open(page_path).evaluate("1")
        raise RuntimeError("a failing test")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not profile.exists()
    assert leftover_processes(pid, profile.parent) == []


def test_no_chromium_on_path_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("PATH", str(tmp_path))
    with (
        pytest.raises(BrowserError, match=r"scripts/bootstrap dev.*apt-get install chromium"),
        chromium(),
    ):
        pass
