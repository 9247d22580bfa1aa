"""The console every command prints through, and how a table reaches it.

Output fits the terminal (80 columns when piped, or $COLUMNS): each table is rendered by the presentation
layer (`present.render`) in the fullest form that fits without cutting a number, and `hierconsole --wide`
prints everything at its natural width instead.
"""

from __future__ import annotations

import sys

from rich.console import Console

from hierconsole.errors import HierconsoleError
from hierconsole.present.grid import Grid
from hierconsole.present.render import render

WIDE_WIDTH = 1_000
_wide = False


def set_wide(wide: bool) -> None:
    """`--wide`: every table at its natural width, nothing abbreviated (for wide terminals and files)."""
    global _wide
    _wide = wide


def output_console() -> Console:
    """Rich output for stdout, as wide as the terminal ($COLUMNS or 80 when piped) unless --wide."""
    return Console(highlight=False, width=WIDE_WIDTH if _wide else None)


def print_grid(console: Console, grid: Grid) -> None:
    """`grid` in the fullest form that fits the console's width, every number whole."""
    for part in render(grid, console.width):
        console.print(part)


def confirmed(question: str, *, yes: bool) -> bool:
    """Whether to go on: `yes` (the --yes flag), else the user's answer to `question`; "kept" otherwise.
    An answer piped in counts as typed; with no answer to read (no terminal, stdin closed or empty) it
    refuses in one line rather than guess."""
    if yes:
        return True
    no_answer = HierconsoleError(f"no terminal to confirm: {question} Pass --yes to go on without asking")
    if sys.stdin is None:
        raise no_answer
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        if not sys.stdin.isatty():
            raise no_answer from None
        answer = ""  # Ctrl-D at the prompt: no answer is a no
    if answer.strip().lower() in ("y", "yes"):
        return True
    output_console().print("kept")
    return False
