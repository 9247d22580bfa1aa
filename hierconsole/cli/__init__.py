"""`hierconsole`: the TUI with no arguments, headless subcommands otherwise.

Each command group lives in its own module exposing ``register(subparsers)``; the module adds its
parsers and sets ``func`` (taking the parsed namespace, returning an exit status). Building the parser
imports no torch: only `score` runs the engine (and `replicate`'s calibration times it), each importing it
when it runs.
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
from hierconsole.cli.completion import COMPLETING
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
    "serve",
    "completion",
)
COMMANDS: dict[str, str] = {
    "import": "data", "datasets": "data", "taxonomy": "data",
    "score": "score",
    "extract": "extract",
    "run": "running", "demo": "running", "resume": "running", "delete": "running", "cancel": "running",
    "rescore": "running",
    "studies": "inspecting", "runs": "inspecting", "audit": "inspecting",
    "effects": "analysis", "export": "analysis",
    "contrast": "families", "families": "families", "sweep": "families",
    "plot": "report", "report": "report",
    "doctor": "doctor",
    "replicate": "replicate",
    "serve": "serve",
    "completion": "completion",
}  # fmt: skip
"""The module of COMMAND_MODULES that registers each command, so that running one builds (and imports)
only its module's parsers: importing every command's module cost a read command most of its start-up.
tests/cli/test_parser.py checks it against what the modules register."""
GLOBAL_FLAGS = ("--wide",)
GLOBAL_VALUED = ("--home",)
VERSION_FLAG = "--version"
"""The options before the command (build_parser adds them); a valued one takes the next word."""


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, when only the global options come before it; None otherwise (no command,
    --help, --version, a word that is no command)."""
    words = iter(argv)
    for word in words:
        if word in GLOBAL_VALUED:
            next(words, None)
        elif word.split("=", 1)[0] in GLOBAL_VALUED or word in GLOBAL_FLAGS:
            continue
        else:
            return word if word in COMMANDS else None
    return None


def only_global_options(argv: Sequence[str]) -> bool:
    """Whether `argv` holds nothing but the global options and their values (it opens the console), or
    asks for the version: neither needs any command's parser."""
    words = iter(argv)
    for word in words:
        if word in GLOBAL_VALUED:
            if next(words, None) is None:
                return False  # the full parser says which value is missing
        elif not (word.split("=", 1)[0] in GLOBAL_VALUED or word in GLOBAL_FLAGS or word == VERSION_FLAG):
            return False
    return True


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv` that runs a command, with only that command's module registered (the same
    parser for that command: its options, help and errors come from the same `register`); given `argv`
    that opens the console or asks for the version, with none (registering them all imported the store,
    polars and the orchestrator before the console's first frame: two thirds of its start-up)."""
    given = None if COMPLETING in os.environ else argv  # completion needs every command's parser
    command = None if given is None else command_of(given)
    epilog: str | None = None
    if command is not None:
        modules: tuple[str, ...] = (COMMANDS[command],)
    elif given is not None and only_global_options(given):
        modules = ()
    else:
        from hierconsole.cli.completion import shipped_listing

        modules, epilog = COMMAND_MODULES, shipped_listing()
    parser = argparse.ArgumentParser(
        prog="hierconsole",
        description="Controlled hierarchy-aware retrieval studies on frozen image features.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the listing's lines as shipped_listing wraps them
    )
    parser.add_argument(VERSION_FLAG, action="version", version=f"hierconsole {__version__}")
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
    for name in modules:
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


def not_utf8(argv: Sequence[str]) -> str | None:
    """Why a word of `argv` cannot be taken, when one holds bytes that are not UTF-8 (a file named in
    another encoding: Python hands such bytes over as surrogates, which no store row, manifest or message
    can hold); None when every word is text."""
    for word in argv:
        try:
            word.encode("utf-8")
            continue
        except UnicodeEncodeError as exc:
            at = exc.start
        shown = ascii(word.encode("utf-8", "surrogateescape") if _escaped(word) else word)
        shown = shown[2:-1] if shown.startswith("b") else shown[1:-1]  # the quotes off: each bad byte as \xNN
        return (
            f"'{shown}' is not valid UTF-8 (at character {at}); hierconsole keeps file names, paths and names "
            "as UTF-8 text: rename it to a UTF-8 name and give that"
        )
    return None


def _escaped(word: str) -> bool:
    """Whether every surrogate of `word` stands for a byte (how Python decodes a name it cannot read)."""
    return all(not 0xD800 <= ord(ch) <= 0xDFFF or 0xDC80 <= ord(ch) <= 0xDCFF for ch in word)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    undecodable = not_utf8(words)
    if undecodable is not None:  # before any command reads the word, records it or quotes it
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(undecodable)}", highlight=False)
        return HierconsoleError.exit_code
    parser = build_parser(words)
    if COMPLETING in os.environ:  # the shell asks for completions (`hierconsole completion bash`): answer, exit
        from hierconsole.cli.completion import complete

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
