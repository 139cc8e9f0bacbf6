"""Open a report in headless Chromium and measure what a reader would see.

Talks to the browser over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages ending in a NUL byte on file descriptors 3 and 4), so it needs no package beyond
the system's `chromium`. Also a script: `python tests/report/chromium.py results/` checks
every report.html under a folder (e.g. all 16 quick reports) and prints one line per page;
`python tests/report/chromium.py --screenshots REPORT.html docs/images` saves the screenshots
the README shows.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

VIEWPORT = (1280, 900)  # CSS px
HEIGHT_BUDGET = 16_000  # CSS px: a report longer than this is mostly unread tables
MEASURE = """JSON.stringify({
  height: document.documentElement.scrollHeight,
  images: [...document.images].map(i => ({
    alt: i.alt, complete: i.complete, natural: [i.naturalWidth, i.naturalHeight],
    drawn: [i.clientWidth, i.clientHeight]})),
})"""


def find_chromium() -> str | None:
    """The system's Chromium binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Page:
    """What the browser saw: page height, every image, console errors, a screenshot."""

    height: int
    images: list[dict]
    errors: list[str] = field(default_factory=list)
    screenshot: bytes = b""

    def problems(self, height_budget: int = HEIGHT_BUDGET) -> list[str]:
        """Broken images, console errors, images drawn larger than their pixels, too long."""
        found = [f"console: {e}" for e in self.errors]
        for image in self.images:
            if not image["complete"] or image["natural"][0] == 0:
                found.append(f"broken image {image['alt']!r}")
            elif any(n < d for n, d in zip(image["natural"], image["drawn"], strict=True)):
                found.append(f"image {image['alt']!r} is {image['natural']} px drawn at "
                             f"{image['drawn']}")  # fmt: skip
        if self.height > height_budget:
            found.append(f"page is {self.height} px tall (budget {height_budget})")
        return found


class Browser:
    """A headless Chromium driven over the DevTools pipe; use as a context manager."""

    def __init__(self, binary: str, timeout: float = 60.0):
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="rankcollapse-chromium-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # Moved to fds >= 10 (bash reads any fd number), so "3<&A 4>&B" never reads a fd it has
        # just replaced.
        to_browser, from_browser = (_high_fd(fd) for fd in (to_browser, from_browser))
        flags = "--headless --disable-gpu --no-sandbox --no-first-run --hide-scrollbars "
        flags += f"--remote-debugging-pipe --user-data-dir={self._profile} about:blank"
        # The pipe must be fds 3 (browser reads) and 4 (browser writes).
        self._process = subprocess.Popen(
            ["bash", "-c", f"exec {binary} {flags} 3<&{to_browser} 4>&{from_browser}"],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):
            self.call("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        os.close(self._write)
        os.close(self._read)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _message(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium sent nothing within the timeout")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: object) -> dict:
        """Send one command and return its result; events seen meanwhile are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_for(self, method: str) -> dict:
        for i, event in enumerate(self._events):
            if event.get("method") == method:
                return self._events.pop(i)
        while True:
            event = self._message()
            if event.get("method") == method:
                return event
            self._events.append(event)

    def open(self, path: Path, *, screenshot: bool | str = False) -> Page:
        """Load `path` at VIEWPORT, then measure it; `screenshot`: True for the first screen,
        an element id for one screen starting at that element."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session)
        width, height = VIEWPORT
        self.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self._events.clear()
        self.call("Page.navigate", session, url=Path(path).resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        result = self.call("Runtime.evaluate", session, expression=MEASURE, returnByValue=True)
        measured = json.loads(result["result"]["value"])
        shot = b""
        if screenshot:
            top = 0
            if isinstance(screenshot, str):
                where = f"document.getElementById({json.dumps(screenshot)}).offsetTop"
                top = self.call("Runtime.evaluate", session, expression=where)["result"]["value"]
            clip = {"x": 0, "y": top, "width": width, "height": height, "scale": 1}
            data = self.call("Page.captureScreenshot", session, clip=clip,
                             captureBeyondViewport=True)["data"]  # fmt: skip
            shot = base64.b64decode(data)
        errors = [_error_text(e) for e in self._events if _is_error(e)]
        self.call("Target.closeTarget", targetId=target)
        return Page(measured["height"], measured["images"], errors, shot)


def _high_fd(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


def _is_error(event: dict) -> bool:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        return True
    if method == "Runtime.consoleAPICalled":
        return params.get("type") == "error"
    return method == "Log.entryAdded" and params["entry"].get("level") == "error"


def _error_text(event: dict) -> str:
    params = event["params"]
    if "entry" in params:
        return params["entry"].get("text", "")
    if "exceptionDetails" in params:
        return params["exceptionDetails"].get("text", "")
    return " ".join(str(a.get("value", "")) for a in params.get("args", []))


def main(folder: str) -> int:
    binary = find_chromium()
    if binary is None:
        print("no chromium binary found (apt-get install chromium)", file=sys.stderr)
        return 2
    reports = sorted(Path(folder).rglob("report.html"))
    failed = 0
    with Browser(binary) as browser:
        for path in reports:
            page = browser.open(path)
            problems = page.problems()
            failed += bool(problems)
            status = "ok" if not problems else "; ".join(problems)
            print(f"{path}: {page.height} px, {len(page.images)} images: {status}")
    print(f"{len(reports) - failed} of {len(reports)} reports pass")
    return 1 if failed else 0


def screenshots(report: str, folder: str) -> int:
    """The README's two screenshots of a report: its first screen and its findings."""
    with Browser(find_chromium() or "chromium") as browser:
        for name, where in (("report-summary.png", True), ("report-findings.png", "findings")):
            page = browser.open(Path(report), screenshot=where)
            (Path(folder) / name).write_bytes(page.screenshot)
            print(f"wrote {Path(folder) / name}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--screenshots"]:
        sys.exit(screenshots(*sys.argv[2:4]))
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results"))
