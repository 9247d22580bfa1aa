"""`hierconsole serve`: the console in a real headless Chromium through textual-serve, and its refusals."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hierconsole.cli import main
from hierconsole.cli.serve import SERVE_EXTRA_HINT, announcement
from tests.cli.served_console import (
    FIRST_VIEW,
    ServedPage,
    descendants,
    free_port,
    start_server,
    stop_server,
    wait_until,
)

RUNS_HEADER = "study  dataset  phase  jobs"
"""The runs view's study table header, which key 2 brings up."""
HOLD_STORE = """
import sys, time
from hierconsole.study.db.storage import Store
store = Store(sys.argv[1])
print("held", flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def the_console(server_pid: int, home: Path) -> int:
    """The one process below the server, checked to be the console on `home` (not a shell around it)."""
    (pid,) = wait_until(lambda: descendants(server_pid), "the session's console process")
    assert cmdline(pid) == [sys.executable, "-m", "hierconsole", "--home", str(home)]
    return pid


async def handshake_status(url: str, headers: dict[str, str]) -> int:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def page_status(url: str, headers: dict[str, str]) -> int:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status


@pytest.mark.slow
def test_the_console_in_headless_chromium(tmp_path):
    pytest.importorskip("textual_serve", reason=SERVE_EXTRA_HINT)
    home = tmp_path / "home"
    port = free_port()
    server, line = start_server(home, port)
    page = ServedPage(tmp_path / "profile")
    try:
        assert f"on http://127.0.0.1:{port} " in line
        assert "anyone who can reach this port can drive the console" in line
        assert f"ssh -L {port}:127.0.0.1:{port} user@host" in line

        # Another site's page may not open the console's websocket, nor may a rebound name reach it.
        ws = f"ws://127.0.0.1:{port}/ws"
        assert asyncio.run(handshake_status(ws, {"Origin": "http://evil.example"})) == 403
        assert asyncio.run(page_status(f"http://127.0.0.1:{port}/", {"Host": f"evil.example:{port}"})) == 403
        assert asyncio.run(handshake_status(ws, {"Host": f"evil.example:{port}"})) == 403
        assert descendants(server.pid) == []

        # A console that cannot open the store (another process holds it) says why on its page.
        holder = subprocess.Popen([sys.executable, "-c", HOLD_STORE, str(home)], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            page.open(f"http://127.0.0.1:{port}/")
            said = page.wait_for("reload this page to start a new console")
            assert f"the store {home / 'hierconsole.duckdb'} is" in said.replace("\n", "")
            assert not page.closed()
            assert descendants(server.pid) == []
        finally:
            holder.kill()
            holder.wait()

        # The first view, then key 2 (the runs view), as the page paints them.
        page.open(f"http://127.0.0.1:{port}/")
        first = page.wait_for(FIRST_VIEW)
        assert RUNS_HEADER not in first
        console = the_console(server.pid, home)
        # Self-contained: nothing asked of another server (textual-serve's page fetches a Google font), and
        # the font it draws in is the copy it serves.
        urls = page.browser.requested_urls()
        assert urls and all(u.startswith(f"http://127.0.0.1:{port}/") for u in urls), urls
        assert any(u.endswith("/static/fonts/RobotoMono-VariableFont_wght.ttf") for u in urls), urls
        assert page.browser.evaluate("document.fonts.check('16px \"Roboto Mono\"')") is True
        page.press("2")
        page.wait_for(RUNS_HEADER, gone=FIRST_VIEW)
        shot = page.screenshot()
        assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 10_000

        # A closed tab ends its console.
        page.close_page()
        wait_until(lambda: not alive(console), "the console to quit after its page closed")
        assert descendants(server.pid) == []

        # A new session runs a new console; a second one at once is told the store is taken and runs none.
        page.open(f"http://127.0.0.1:{port}/")
        page.wait_for(FIRST_VIEW)
        second = the_console(server.pid, home)
        assert second != console
        page.open(f"http://127.0.0.1:{port}/")
        assert "another browser session is using this console" in page.wait_for("another browser session")
        assert not page.closed()  # the message stays readable (a closed page is covered by a dialog)
        assert descendants(server.pid) == [second]
    finally:
        # Stopping the server with a session still open ends that session's console, in bounded time.
        rest = stop_server(server, signal.SIGINT, timeout=120)
        page.close()
    assert server.returncode == 0, rest
    assert not alive(second)
    assert "Traceback" not in rest
    assert rest.count("hierconsole.duckdb is in use by") == 1, rest  # the failed console's error, printed once


def test_bad_ports_and_hosts_are_one_line_and_create_nothing(tmp_path, capsys):
    pytest.importorskip("textual_serve", reason=SERVE_EXTRA_HINT)
    home = tmp_path / "home"
    for args, said in (
        (["--port", "0"], "--port '0' is not a TCP port: pass a whole number from 1 to 65535"),
        (["--port", "70000"], "--port '70000' is not a TCP port"),
        (["--port", "eighty"], "--port 'eighty' is not a TCP port"),
        (["--host", "no-such-host.invalid"], "--host 'no-such-host.invalid' is not an address of this machine"),
        (["--host", "192.0.2.1"], "--host 192.0.2.1 --port 8000 cannot be bound"),
    ):
        assert main(["--home", str(home), "serve", *args]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
        assert not home.exists()


def test_a_taken_port_is_one_line(tmp_path, capsys):
    import socket

    pytest.importorskip("textual_serve", reason=SERVE_EXTRA_HINT)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--home", str(tmp_path / "home"), "serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"--host 127.0.0.1 --port {port} is in use by another program: pass another --port" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists()


def test_without_the_extra_it_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if the serve extra were not installed
    assert main(["--home", str(tmp_path / "home"), "serve"]) == 2
    err = capsys.readouterr().err
    assert "hierconsole serve needs textual-serve, which is not installed: pip install 'hierconsole[serve]'" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists()


@pytest.mark.slow
def test_quitting_in_the_page_and_sigterm(tmp_path):
    pytest.importorskip("textual_serve", reason=SERVE_EXTRA_HINT)
    home = tmp_path / "home"
    port = free_port()
    server, _ = start_server(home, port)
    page = ServedPage(tmp_path / "profile")
    try:
        # q in the console (no job running) quits it, and the page says the session ended.
        page.open(f"http://127.0.0.1:{port}/")
        page.wait_for(FIRST_VIEW)
        console = the_console(server.pid, home)
        page.press("q")
        wait_until(page.closed, "the page to show the session ended")
        wait_until(lambda: not alive(console), "the console to quit on q")
        assert descendants(server.pid) == []
        # SIGTERM with a session open ends its console, then the server.
        page.open(f"http://127.0.0.1:{port}/")
        page.wait_for(FIRST_VIEW)
        second = the_console(server.pid, home)
    finally:
        rest = stop_server(server, signal.SIGTERM, timeout=120)
        page.close()
    assert server.returncode == 0, rest
    assert not alive(second)
    assert "Traceback" not in rest


def test_the_announcement_names_the_url_the_risk_and_the_tunnel():
    import socket

    home = Path("/data/home")
    local = announcement("127.0.0.1", 8000, home)
    assert local.startswith("serving the console of /data/home on http://127.0.0.1:8000 ")
    assert "warning: anyone who can reach this port can drive the console" in local
    assert local.endswith("tunnel instead of --host 0.0.0.0: ssh -L 8000:127.0.0.1:8000 user@host")
    # The tunnel ends where the server listens.
    assert announcement("::1", 9000, home).endswith("ssh -L 9000:[::1]:9000 user@host")
    assert " on http://[::1]:9000 " in announcement("::1", 9000, home)
    # On every address: the machine's name to browse to, and the advice to listen on loopback instead.
    everywhere = announcement("0.0.0.0", 8000, home)
    assert f" on http://{socket.gethostname()}:8000 " in everywhere
    assert "anyone who can reach this port can drive the console" in everywhere
    assert everywhere.endswith("prefer the default --host 127.0.0.1 and a tunnel: ssh -L 8000:127.0.0.1:8000 user@host")
