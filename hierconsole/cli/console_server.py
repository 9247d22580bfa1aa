"""The web server behind `hierconsole serve`: textual-serve's, one console process per browser session.

Imported only by `hierconsole serve`, once it has found the serve extra. What it changes in textual-serve:

- one session at a time, as the store admits one console: a second browser is told so on its page;
- a console that ends without closing its page (it could not open the store, it failed) says why there;
- the page's own links (the websocket, the scripts) use the address the browser used, so a tunnel from any
  local port works, and it asks nothing of another server: its font, which textual-serve's page fetches
  from Google Fonts, is the copy textual-serve ships (so it looks the same offline, and loads before the
  terminal measures its cells);
- a websocket from another site's page (its Origin not this server) is refused, and on a loopback address a
  request naming a host other than this machine (DNS rebinding) is refused: otherwise any web page open in
  the user's browser could drive the console;
- stopping the server (SIGINT, SIGTERM) ends every session's console first, killing one that does not quit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from asyncio.subprocess import Process
from collections.abc import Callable
from typing import Any

from aiohttp import web
from rich.logging import RichHandler
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int
from yarl import URL

from hierconsole.tui import ORCHESTRATOR_STOP_SECONDS

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
STOP_SECONDS = ORCHESTRATOR_STOP_SECONDS + 10.0
"""How long a session's console may take to quit (it lets its orchestrator finish a tick) before it is killed."""
BUSY = (
    "another browser session is using this console (the store admits one console at a time): "
    "close that tab, then reload this page\r\n"
)
RELOAD = "\r\nreload this page to start a new console\r\n"
ERROR_LINES = 20
"""The last lines of what a console wrote to stderr shown on its page when it ended."""

FONT_LINK = re.compile(r'<link\s+rel="stylesheet"\s+href="https://fonts\.googleapis\.com/[^"]*"\s*/>')
LOCAL_FONT = """<style>
      @font-face {{
        font-family: "Roboto Mono";
        src: url("{static}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
        font-style: normal;
      }}
      @font-face {{
        font-family: "Roboto Mono";
        src: url("{static}fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
        font-style: italic;
      }}
    </style>
    <script>
      // textual-serve's script opens the terminal on load, which measures its cells in the font it has
      // then: it waits for the font here.
      addEventListener("DOMContentLoaded", () => {{
        const open = window.onload;
        window.onload = null;
        addEventListener("load", (event) => {{
          document.fonts.load('16px "Roboto Mono"').finally(() => open && open(event));
        }});
      }});
    </script>"""

log = logging.getLogger("hierconsole.serve")


def self_contained(page: str, static: str) -> str:
    """textual-serve's page with its web font served from `static` (textual-serve's own copy of it)."""
    return FONT_LINK.sub(lambda _: LOCAL_FONT.format(static=static), page, count=1)


class ConsoleSession(AppService):
    """One browser session's console: textual-serve's AppService, keeping what the console writes to stderr,
    so that a console that ends without closing its page can say why on it."""

    def __init__(
        self,
        command: str,
        websocket: web.WebSocketResponse,
        server: Server,
        on_end: Callable[[ConsoleSession], None],
    ) -> None:
        async def close() -> None:
            await websocket.close()

        super().__init__(
            command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=server.download_manager,
        )
        self.websocket = websocket
        self.on_end = on_end
        self.errors = bytearray()
        self._copying: asyncio.Task[None] | None = None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        process = await super()._open_app_process(width, height)
        # textual-serve reads the console's stderr only to print it (twice when the console fails to start):
        # it is read here instead, printed once on the server's terminal and shown on the page.
        assert process.stderr is not None
        real, empty = process.stderr, asyncio.StreamReader()
        empty.feed_eof()
        process.stderr = empty
        self._copying = asyncio.create_task(self._read_errors(real))
        return process

    async def _read_errors(self, stderr: asyncio.StreamReader) -> None:
        while data := await stderr.read(4096):
            self.errors += data

    async def run(self) -> None:
        await super().run()  # until the console's output ends: it has quit, or could not start
        if self._copying is not None:
            await self._copying
        self.on_end(self)
        if self.errors:
            sys.stdout.write(self.errors.decode("utf-8", "replace"))
            sys.stdout.flush()
        if self.websocket.closed:  # the console closed its page (it quit), or the page went first
            return
        lines = self.errors.decode("utf-8", "replace").strip().splitlines()[-ERROR_LINES:]
        said = "\r\n".join(lines) if lines else "the console ended"
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.websocket.send_bytes((said + "\r\n" + RELOAD).encode())


class ConsoleServer(Server):
    def __init__(self, command: str, *, host: str, port: int, loopback_only: bool) -> None:
        super().__init__(command, host=host, port=port, title="hierconsole")
        self.loopback_only = loopback_only
        self.running: ConsoleSession | None = None
        """The session whose console runs now (the store admits one)."""
        self.pages: set[web.WebSocketResponse] = set()
        """Every open page's websocket, closed when the server stops."""

    def initialize_logging(self) -> None:
        # Warnings and errors only (a console that failed to start, a refused request): no access log.
        logging.basicConfig(
            level="WARNING",
            format="%(message)s",
            handlers=[RichHandler(show_path=False, show_time=False, console=self.console)],
        )

    async def on_startup(self, app: web.Application) -> None:
        """`hierconsole serve` has said where it listens; textual-serve's banner is not repeated."""

    async def on_shutdown(self, app: web.Application) -> None:
        # aiohttp waits for open websockets before it stops; closing them ends each session's console.
        for websocket in list(self.pages):
            with contextlib.suppress(Exception):
                await websocket.close()

    def refusal(self, request: web.Request) -> str | None:
        """Why `request` may not reach the console, if it may not."""
        host = URL(f"http://{request.host}").host or ""
        if self.loopback_only and host.strip("[]") not in LOOPBACK_NAMES:
            return f"this console serves only this machine's own addresses, not {request.host!r}"
        origin = request.headers.get("Origin")
        if origin is not None and URL(origin).raw_authority != request.host:
            return f"a page from {origin} may not open this console"
        return None

    async def handle_index(self, request: web.Request) -> Any:
        if (why := self.refusal(request)) is not None:
            log.warning("refused %s: %s", request.path, why)
            raise web.HTTPForbidden(text=why)
        # The page's URLs, the websocket's included, are those the browser used (a tunnel's local port).
        self.public_url = f"{request.scheme}://{request.host}"
        response = await super().handle_index(request)
        if isinstance(response, web.Response) and response.text is not None:
            response.text = self_contained(response.text, f"{self.public_url}/static/")
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if (why := self.refusal(request)) is not None:
            log.warning("refused %s: %s", request.path, why)
            raise web.HTTPForbidden(text=why)
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        self.pages.add(websocket)
        try:
            if self.running is not None:
                # Said on the page, which stays open (a closed page is covered by textual-serve's dialog).
                await websocket.send_bytes(BUSY.encode())
                async for _ in websocket:
                    pass
                return websocket
            self.running = service = ConsoleSession(self.command, websocket, self, self.ended)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            try:
                await service.start(width, height)
                await self._process_messages(websocket, service)
            finally:
                await end_session(service)
                self.ended(service)
        finally:
            self.pages.discard(websocket)
        return websocket

    def ended(self, service: ConsoleSession) -> None:
        """`service`'s console is gone: another page may start one."""
        if self.running is service:
            self.running = None


async def end_session(service: AppService) -> None:
    """Ask the session's console to quit; kill it if it has not within STOP_SECONDS. Returns once it is gone."""
    with contextlib.suppress(TimeoutError, ConnectionError):
        await asyncio.wait_for(service.stop(), STOP_SECONDS)
    process = service._process  # textual-serve keeps the console's process here
    if process is None:
        return
    try:
        await asyncio.wait_for(process.wait(), STOP_SECONDS)
    except TimeoutError:
        log.warning("the console (pid %s) did not quit in %.0f s: killed", process.pid, STOP_SECONDS)
        process.kill()
        await process.wait()
