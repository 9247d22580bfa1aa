"""Shell completion (argcomplete): `hierconsole completion bash|zsh` prints the script to eval, and a shell
asking for completions (`_ARGCOMPLETE` set) gets the commands and options, the shipped presets and
families, the studies of the home and the `--set` keys of the preset schema.

A completion runs on every Tab press, so it reads only what is cheap and certain never to fail: study ids
are the home's study folders (no store is opened, nothing is locked, no torch is imported), and any error
completes nothing rather than print into the user's command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hierconsole.errors import HierconsoleError

SHELLS: tuple[str, ...] = ("bash", "zsh")
PROG = "hierconsole"
COMPLETING = "_ARGCOMPLETE"
"""The variable argcomplete's shell function sets when it asks for completions."""

Completer = Callable[..., list[str]]


def shipped_names(folder_of: Callable[[], Any]) -> list[str]:
    """The bare names of the TOML files in a shipped folder (presets, families): a listing, no file read."""
    try:
        return sorted(p.stem for p in folder_of().glob("*.toml"))
    except OSError:
        return []


def shipped_listing(width: int = 78) -> str:
    """What `hierconsole --help` says after the options: the presets and families `run` takes by name,
    wrapped at the commas (a name is never cut at its hyphens)."""
    from hierconsole.config.family import families_dir
    from hierconsole.config.files import presets_dir

    lines = []
    for what, folder in (("presets", presets_dir), ("families", families_dir)):
        names = ", ".join(shipped_names(folder)) or "none"
        lines.append(f"shipped {what} (`{PROG} run NAME`):")
        lines += textwrap.wrap(
            names, width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
        )
    return "\n".join(lines)


def _never_failing(completer: Completer) -> Completer:
    def complete(prefix: str = "", parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
        try:
            return [c for c in completer(prefix, parsed_args) if c.startswith(prefix)]
        except Exception:  # a completion prints nothing rather than a traceback into the command line
            return []

    return complete


def _folders(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _home(parsed_args: argparse.Namespace | None) -> Path:
    from hierconsole.locations import resolve_home

    return resolve_home(getattr(parsed_args, "home", None), create=False)


def _home_studies(prefix: str, parsed_args: argparse.Namespace | None) -> list[str]:
    from hierconsole.locations import study_dir

    return _folders(study_dir(_home(parsed_args), "_").parent)


def _home_datasets(prefix: str, parsed_args: argparse.Namespace | None) -> list[str]:
    """The home's registered datasets: each has its self-contained folder."""
    from hierconsole.locations import dataset_dir

    return _folders(dataset_dir(_home(parsed_args), "_").parent)


def _studies_and_families(prefix: str, parsed_args: argparse.Namespace | None) -> list[str]:
    from hierconsole.config.family import families_dir

    return _home_studies(prefix, parsed_args) + shipped_names(families_dir)


def _presets(prefix: str, parsed_args: argparse.Namespace | None) -> list[str]:
    from argcomplete.completers import FilesCompleter

    from hierconsole.config.family import families_dir
    from hierconsole.config.files import presets_dir

    files = list(FilesCompleter(allowednames=("toml",))(prefix)) if prefix[:1] in (".", "/", "~") else []
    return shipped_names(presets_dir) + shipped_names(families_dir) + files


def _set_keys(prefix: str, parsed_args: argparse.Namespace | None) -> list[str]:
    from hierconsole.config.preset import option_keys

    return [f"{key}=" for key in option_keys()]


def _tables(prefix: str, parsed_args: argparse.Namespace | None) -> list[str]:
    from hierconsole.cli.tracker import TRACKERS
    from hierconsole.study.read.results import FAMILY_TABLES, TABLES

    return [*TABLES, *FAMILY_TABLES, *TRACKERS]


def _completer_for(action: argparse.Action) -> Completer | None:
    """Which values an argument takes, from its name: the commands' modules stay free of completion."""
    names = {action.dest, *action.option_strings, str(action.metavar or "")}
    if "--set" in names:
        return _set_keys
    if action.dest == "shell":
        return lambda prefix, parsed_args: list(SHELLS)
    if action.dest == "preset":
        return _presets
    if action.dest == "table":
        return _tables
    if action.dest == "dataset":
        return _home_datasets
    if "FAMILY" in str(action.metavar or ""):
        return _studies_and_families
    if names & {"study", "tracked_study", "--study"} or "STUDY" in str(action.metavar or ""):
        return _home_studies
    return None


def _subparsers(parser: argparse.ArgumentParser) -> Iterable[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to one parser
                yield from _subparsers(sub)


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit (argcomplete writes to the fd it was given)."""
    try:
        import argcomplete
    except ImportError:
        os._exit(1)  # nothing to complete with; never fall through to running the command line
    for sub in _subparsers(parser):
        for action in sub._actions:
            completer = _completer_for(action)
            if completer is not None:
                action.completer = _never_failing(completer)  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser, always_complete_options=False)  # options once a `-` is typed


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "completion",
        help='print the shell completion script: eval "$(hierconsole completion bash)"',
        description="Completes commands, options, preset and family names, the home's study ids and the "
        '--set keys. Add `eval "$(hierconsole completion bash)"` to ~/.bashrc (or zsh to ~/.zshrc).',
    )
    p.add_argument("shell", metavar="SHELL", help=f"one of: {', '.join(SHELLS)}")
    p.set_defaults(func=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    if args.shell not in SHELLS:
        raise HierconsoleError(
            f"no completion for shell {args.shell!r}\n  fix: use one of {', '.join(SHELLS)}"
        )
    try:
        import argcomplete
    except ImportError:
        raise HierconsoleError("shell completion needs argcomplete: pip install argcomplete") from None
    sys.stdout.write(argcomplete.shellcode([PROG], shell=args.shell))
    return 0
