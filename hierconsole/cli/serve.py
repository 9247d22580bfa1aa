"""`hierconsole serve [--host H] [--port N]`: the console in a browser, through textual-serve.

Each browser session runs its own console process on the same home (`python -m hierconsole --home HOME`,
the command with no subcommand). textual-serve (the `serve` extra) is imported only when the command runs,
after the host and port have been checked, so a missing extra or a taken port is one line and nothing else.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import ipaddress
import shlex
import socket
import sys
from pathlib import Path

from rich.markup import escape

from hierconsole.cli.output import output_console
from hierconsole.errors import HierconsoleError
from hierconsole.locations import resolve_home

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
SERVE_EXTRA_HINT = "pip install 'hierconsole[serve]'"


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "serve",
        help="the console in a browser (textual-serve; one console per browser session, on this home)",
        description="Serve the console over HTTP: each browser session runs its own console on this home. "
        "Anyone who can reach the port can drive the console; keep the default host and reach it from "
        "another machine through an SSH tunnel. Needs the serve extra (" + SERVE_EXTRA_HINT + ").",
    )
    s.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default: {DEFAULT_HOST}, this machine only; prefer an SSH tunnel to "
        "0.0.0.0)",
    )
    s.add_argument("--port", default=str(DEFAULT_PORT), help=f"TCP port, 1 to 65535 (default: {DEFAULT_PORT})")
    # The server's own handler ends every session's console on SIGTERM, then exits 0 (as systemd expects).
    s.set_defaults(func=cmd_serve, stops_on_sigterm=True)


def check_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise HierconsoleError(f"--port {text!r} is not a TCP port: pass a whole number from 1 to 65535, e.g. --port 8000")
    return port


def check_bindable(host: str, port: int) -> None:
    """Bind `host`:`port` once and let it go, so a bad address or a taken port is reported before serving."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise HierconsoleError(
            f"--host {host!r} is not an address of this machine ({exc}): pass an address such as 127.0.0.1"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # As aiohttp will bind it: a port left in TIME_WAIT by an earlier server is free to reuse.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                why = "is in use by another program: pass another --port"
            elif exc.errno == errno.EACCES:
                why = "needs privileges to bind: pass a --port above 1023"
            else:
                why = f"cannot be bound ({exc.strerror or exc}): pass an address of this machine, such as 127.0.0.1"
            raise HierconsoleError(f"--host {host} --port {port} {why}") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def console_command(home: Path) -> str:
    """The shell command textual-serve runs per browser session: this interpreter's console on `home`.

    `exec` makes the console the shell's own process, so that stopping the session stops the console itself.
    """
    return f"exec {shlex.quote(sys.executable)} -m hierconsole --home {shlex.quote(str(home))}"


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    """Where a browser finds the server: on every address (0.0.0.0, ::) by this machine's name."""
    if is_wildcard(host):
        host = socket.gethostname()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def announcement(host: str, port: int, home: Path) -> str:
    """The line `serve` prints once it listens: where to point a browser, and who else can."""
    reach = "anyone who can reach this port can drive the console"
    if is_loopback(host):
        target = f"[{host}]" if ":" in host else host  # the tunnel ends where the server listens
        where = f"from another machine, tunnel instead of --host 0.0.0.0: ssh -L {port}:{target}:{port} user@host"
    else:
        where = f"prefer the default --host {DEFAULT_HOST} and a tunnel: ssh -L {port}:{DEFAULT_HOST}:{port} user@host"
    return f"serving the console of {home} on {url_of(host, port)} (Ctrl+C stops); warning: {reach}; {where}"


def cmd_serve(args: argparse.Namespace) -> int:
    # Everything is checked before anything is created or imported: the extra, then the port and the host.
    if importlib.util.find_spec("textual_serve") is None:
        raise HierconsoleError(f"hierconsole serve needs textual-serve, which is not installed: {SERVE_EXTRA_HINT}")
    port = check_port(args.port)
    host = args.host
    check_bindable(host, port)
    home = resolve_home(args.home)
    from hierconsole.cli.console_server import ConsoleServer

    server = ConsoleServer(console_command(home), host=host, port=port, loopback_only=is_loopback(host))
    output_console().print(escape(announcement(host, port, home)), highlight=False, soft_wrap=True)
    try:
        server.serve()
    except OSError as exc:  # taken between the check and the bind
        raise HierconsoleError(f"--host {host} --port {port} cannot be served: {exc.strerror or exc}") from None
    return 0
