"""The console every command prints through."""

from __future__ import annotations

from rich.console import Console

PIPE_WIDTH = 160


def output_console() -> Console:
    """Rich output for stdout; piped or captured output is not squeezed into 80 columns."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(console.width, PIPE_WIDTH))
    return console


def confirmed(question: str, *, yes: bool) -> bool:
    """Whether to go on: `yes` (the --yes flag), else the user's answer to `question`; "kept" otherwise."""
    if yes or input(f"{question} [y/N] ").strip().lower() in ("y", "yes"):
        return True
    output_console().print("kept")
    return False
