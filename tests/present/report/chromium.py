"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands on
fd 3, replies and events on fd 4, each message JSON ending in a NUL byte), so the report test needs no
driver package: only Debian's `chromium` (installed by .ci/run)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

TIMEOUT = 60.0


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no Chromium on PATH: install Debian's chromium (`apt-get install -y chromium`, as .ci/run does)")


class Browser:
    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium expects its pipe ends at fds 3 and 4 exactly: dup2 puts them there in the child (and makes
        # them inheritable); every other descriptor is non-inheritable (PEP 446), so close_fds is not needed
        # and would close 3 and 4 again.
        def child_fds() -> None:
            # Through fresh copies first: a pipe end already at 3 or 4 would otherwise stay non-inheritable
            # (dup2 onto itself changes nothing), or be overwritten by the other before it is moved.
            read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [
                chromium_binary(),
                "--headless=new",
                "--remote-debugging-pipe",
                "--no-sandbox",  # root in CI and in containers
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            close_fds=False,
            preexec_fn=child_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        self.target: str | None = None

    def send(self, method: str, params: dict | None = None, *, session: bool = True) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        reply = self._wait(lambda m: m.get("id") == self._next_id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        for e in self.events:
            if e["method"] == method:
                return e
        return self._wait(lambda m: m.get("method") == method)

    def _wait(self, matches) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if matches(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0 or self.process.poll() is not None:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed its pipe")
                self._buffer += chunk

    def open(
        self, url: str, *, before_load: str | None = None, size: tuple[int, int] | None = None, wait: bool = True
    ) -> None:
        """Load `url` in a new page: `before_load` runs in it before the page's own scripts, `size` is its
        viewport in CSS pixels; `wait` waits for its load event."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.target = target
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        self.send("Network.enable")
        self.send("Page.enable")
        if before_load is not None:
            self.send("Page.addScriptToEvaluateOnNewDocument", {"source": before_load})
        if size is not None:
            width, height = size
            self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        if wait:
            self.wait_event("Page.loadEventFired")

    def press(self, key: str) -> None:
        """One printable key pressed and released in the focused element, as typed on a keyboard."""
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "text": key, "unmodifiedText": key})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key})

    def close_page(self) -> None:
        """Close the page `open` opened (its connections end as a closed tab's do)."""
        self.send("Target.closeTarget", {"targetId": self.target}, session=False)
        self.session = None

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        return result["result"].get("value")

    def screenshot(self, *, whole_page: bool = True) -> bytes:
        """A PNG of the whole page, or of the viewport alone (a page that fits its content to the viewport
        would otherwise be resized while it is captured)."""
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": whole_page})["data"]
        return base64.b64decode(data)

    def pdf(self) -> bytes:
        return base64.b64decode(self.send("Page.printToPDF", {"printBackground": True})["data"])

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", session=False)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
