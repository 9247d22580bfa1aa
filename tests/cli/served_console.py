"""`hierconsole serve` in a subprocess, and its page in Debian's headless Chromium (tests/present/report/chromium.py).

Shared by tests/cli/test_serve.py, benchmarks/serve_first_paint.py and docs/make_serve_screenshot.py. The
page is read as a person sees it: the rows xterm.js holds on its screen (its buffer), which it paints onto a
canvas (textual-serve loads the WebGL and canvas renderers, so there is no DOM text to read).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.present.report.chromium import Browser

TIMEOUT = 60.0

# textual-serve's script keeps its xterm.js Terminal in a closure (`this.terminal = new Terminal(...)` in the
# constructor of its session object). A setter on Object.prototype, installed before that script runs, sees
# that assignment, stores the value as the object's own property (so the page works as before) and keeps the
# terminal on window for the test.
TERMINAL_HOOK = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer && typeof value.write === "function") window.__terminal = value;
  },
});
"""
SCREEN_ROWS = """(() => {
  const t = window.__terminal;
  if (!t) return null;
  const rows = [];
  for (let y = 0; y < t.rows; y++) {
    const line = t.buffer.active.getLine(y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
})()"""
FOCUS_TERMINAL = "window.__terminal.focus()"

FIRST_VIEW = "This store is empty."
"""The first view of an empty home (the datasets view's welcome)."""
VIEWPORT = (1280, 720)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    """`hierconsole --home HOME serve --port PORT` once the port answers, and the line it printed."""
    server = subprocess.Popen(
        [sys.executable, "-m", "hierconsole", "--home", str(home), "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "400"},  # the announcement on one line, as a terminal this wide shows it
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    deadline = time.monotonic() + TIMEOUT
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return server, line
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            rest = server.communicate()[0]
            raise RuntimeError(f"hierconsole serve did not listen on {port}: {line}{rest}")
        time.sleep(0.05)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, from /proc (each process's parent is field 4 of its stat line)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":  # a zombie has exited; its parent has not reaped it yet
            parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


def wait_until(condition, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.02)


def stop_server(server: subprocess.Popen[str], sig: int = signal.SIGINT, timeout: float = TIMEOUT) -> str:
    """Signal the server and wait for it to exit; what it printed after its first line."""
    server.send_signal(sig)
    return server.communicate(timeout=timeout)[0]


class ServedPage:
    """The served page in a headless Chromium: open it, read the terminal's screen, type, screenshot."""

    def __init__(self, profile: Path) -> None:
        self.browser = Browser(profile)

    def open(self, url: str) -> None:
        # Not waiting for the load event: the page links a web font, which only fails after a network
        # timeout on a machine without internet; the terminal is up long before.
        self.browser.open(url, before_load=TERMINAL_HOOK, size=VIEWPORT, wait=False)

    def screen(self) -> str:
        try:
            return self.browser.evaluate(SCREEN_ROWS) or ""
        except RuntimeError:  # the page is between documents
            return ""

    def wait_for(self, text: str, *, gone: str | None = None, timeout: float = TIMEOUT) -> str:
        """The screen once it shows `text` (and no longer `gone`: a frame is painted in parts)."""

        def shown() -> str | None:
            s = self.screen()
            return s if text in s and (gone is None or gone not in s) else None

        what = f"{text!r} on the page" + (f" without {gone!r}" if gone else "")
        return wait_until(shown, what, timeout)

    def settle(self, quiet: float = 1.0) -> str:
        """The screen once it has not changed for `quiet` seconds (the view has finished painting)."""
        last, since = self.screen(), time.monotonic()
        while time.monotonic() - since < quiet:
            time.sleep(0.05)
            now = self.screen()
            if now != last:
                last, since = now, time.monotonic()
        return last

    def closed(self) -> bool:
        """Whether the page's websocket has closed (textual-serve then covers the page with its dialog)."""
        return bool(self.browser.evaluate("document.body.classList.contains('-closed')"))

    def press(self, key: str) -> None:
        self.browser.evaluate(FOCUS_TERMINAL)
        self.browser.press(key)

    def screenshot(self) -> bytes:
        # The viewport alone: the terminal fits itself to the window, and a larger capture would resize it.
        return self.browser.screenshot(whole_page=False)

    def close_page(self) -> None:
        self.browser.close_page()

    def close(self) -> None:
        self.browser.close()
