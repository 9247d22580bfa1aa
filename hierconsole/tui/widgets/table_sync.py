"""Updating a DataTable in place, so a live refresh keeps the cursor on the row the user is looking at."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from textual.coordinate import Coordinate
from textual.widgets import DataTable


def highlighted_key(table: DataTable) -> str | None:
    if table.row_count == 0 or table.cursor_row < 0:
        return None
    try:
        key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key
    except Exception:  # noqa: BLE001 - a cursor past the rows (after a clear) means nothing is highlighted
        return None
    return key.value


def sync_rows(table: DataTable, rows: Sequence[tuple[str, Sequence[RenderableType]]]) -> None:
    """Show `rows` (key, cells): cells are updated where the keys are unchanged, else rebuilt in place.

    Columns only ever grow, never cut a value: a number or a state is shown whole or not at all."""
    keys = [key for key, _ in rows]
    if keys == [k.value for k in table.rows]:
        columns = list(table.columns)
        for key, cells in rows:
            for column, cell in zip(columns, cells, strict=True):
                if table.get_cell(key, column) != cell:
                    # A live value may outgrow its column ("9/40" -> "10/40"): the column grows with it.
                    table.update_cell(key, column, cell, update_width=True)
        return
    keep = highlighted_key(table)
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if keep in keys:
        table.move_cursor(row=keys.index(keep))
