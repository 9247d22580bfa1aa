"""The console every command prints through, and tables that fit it.

Output fits the terminal (80 columns when piped, or $COLUMNS): tables drop to a compact form that fits,
and `hierconsole --wide` prints everything at its natural width instead.
"""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

WIDE_WIDTH = 1_000
_wide = False


def set_wide(wide: bool) -> None:
    """`--wide`: every table at its natural width, nothing abbreviated (for wide terminals and files)."""
    global _wide
    _wide = wide


def output_console() -> Console:
    """Rich output for stdout, as wide as the terminal ($COLUMNS or 80 when piped) unless --wide."""
    return Console(highlight=False, width=WIDE_WIDTH if _wide else None)


def fits(console: Console, table: Table) -> bool:
    """Whether `table` unsqueezed (every cell whole) fits the console's width."""
    unbounded = console.options.update_width(WIDE_WIDTH)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def fitted(console: Console, *variants: Table) -> Table:
    """The first of `variants` (fullest first) that fits the console's width; the last otherwise."""
    return next((table for table in variants if fits(console, table)), variants[-1])


def confirmed(question: str, *, yes: bool) -> bool:
    """Whether to go on: `yes` (the --yes flag), else the user's answer to `question`; "kept" otherwise."""
    if yes or input(f"{question} [y/N] ").strip().lower() in ("y", "yes"):
        return True
    output_console().print("kept")
    return False
