"""How read commands open the store: read-only, never writing, saying when they read a live snapshot."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from hierconsole.study import read
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import empty_level_note


def open_for_reading(home: str | None) -> Store:
    """The store opened read-only (`Store(read_only=True)`); a note on stderr when what is shown is a
    snapshot published by the process that holds the store, so its age is never mistaken for now."""
    store = Store(home, read_only=True)
    if store.source != str(store.path):
        Console(stderr=True, soft_wrap=True).print(f"[dim]reading {escape(store.source)}[/]", highlight=False)
    return store


def print_empty_levels(store: Store, study_id: str, console: Console) -> None:
    """Name the levels the study's splits leave without a valid query (known before any training)."""
    for level in read.empty_levels(store, study_id):
        console.print(
            f"[yellow]note:[/] {escape(empty_level_note(level))}; it is left out of hier_mAP and of every "
            "table, the other levels are reported",
            highlight=False,
        )
