"""`hierconsole`: the TUI with no arguments, headless subcommands otherwise.

Each command group lives in its own module exposing ``register(subparsers)``; the module adds its
parsers and sets ``func`` (taking the parsed namespace, returning an exit status). Building the parser
imports no torch: only `score` runs the engine, and imports it when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from hierconsole import __version__
from hierconsole.cli.completion import COMPLETING, complete, shipped_listing
from hierconsole.errors import INTERRUPTED_EXIT, TERMINATED_EXIT, HierconsoleError, Terminated, bounded

# Modules under hierconsole.cli, each with register(subparsers). Order is the order in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "data",
    "score",
    "extract",
    "running",
    "inspecting",
    "analysis",
    "families",
    "report",
    "doctor",
    "replicate",
    "calibrate",
    "serve",
    "completion",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hierconsole",
        description="Controlled hierarchy-aware retrieval studies on frozen image features.",
        epilog=shipped_listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the listing's lines as shipped_listing wraps them
    )
    parser.add_argument("--version", action="version", version=f"hierconsole {__version__}")
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=None,
        help="folder holding hierconsole.duckdb and run artifacts (default: $HIERCONSOLE_HOME, "
        "else the user data dir)",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="print tables at their full width (default: fit the terminal, 80 columns when piped)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"hierconsole.cli.{name}").register(sub)
    return parser


def _terminated(signum: int, frame: object) -> None:  # noqa: ARG001
    raise Terminated


def _on_sigterm(handler: Any) -> Any:
    """Install `handler` for SIGTERM, returning the one it replaces (a no-op off the main thread, where
    Python allows no handler: main() called from a notebook's or a test's thread)."""
    if threading.current_thread() is not threading.main_thread():
        return handler
    return signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if COMPLETING in os.environ:  # the shell asks for completions (`hierconsole completion bash`): answer, exit
        complete(parser)
    args = parser.parse_args(argv)
    err = Console(stderr=True, soft_wrap=True)
    from hierconsole.cli.output import set_wide

    set_wide(args.wide)
    try:
        if getattr(args, "func", None) is None:
            from hierconsole.tui import run_app

            return run_app(home=args.home)
        if getattr(args, "stops_on_sigterm", False):  # a server: SIGTERM is how it is stopped, cleanly
            return int(args.func(args) or 0)
        # Python's default SIGTERM ends the process where it stands: no message, workers left running
        # and a store left mid-write. Raised as an exception instead, it leaves like Ctrl-C.
        previous = _on_sigterm(_terminated)
        try:
            return int(args.func(args) or 0)
        finally:
            _on_sigterm(previous)
    except HierconsoleError as exc:
        err.print(f"[bold red]error:[/] {escape(bounded(str(exc)))}", highlight=False)
        return exc.exit_code
    except Terminated:
        err.print("[yellow]terminated (SIGTERM)[/]")
        return TERMINATED_EXIT
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return INTERRUPTED_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
