"""The table model both front ends render: columns that know whether they hold numbers (never wrapped,
never cut) or labels (may wrap), and an optional group (the per-seed columns) that may move to a table of
its own when the whole does not fit. Built by `present.tables`, drawn by `present.render`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text

Cell = str | Text


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = True
    """Numbers are right-justified and never wrapped; labels (numeric=False) may wrap to fit."""
    group: str | None = None
    """Columns sharing a group (e.g. "per seed") move together to a second table when the whole is too
    wide; the table that keeps the others says so."""
    droppable: bool = False
    """A column a narrow form may leave out (a name the id already starts with, a hash); the form that
    leaves it out names it in a note, and the record form keeps it."""
    spill: bool = False
    """A droppable column of long text (an error): the form that leaves it out prints each of its
    non-empty cells below the table, after its row's key, instead of naming it as left out."""
    foldable: bool = False
    """A label whose long words (a path, a hash list) may break mid-word to fit, rather than the table
    changing form for them; never set for an id that another command takes."""
    record_header: str | None = None
    """The header in the record form, where a bare seed number would not say what it is ("seed 0")."""
    style: str = ""
    header_style: str = ""


@dataclass
class Grid:
    title: str
    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)
    section_ends: set[int] = field(default_factory=set)
    """Indices of rows after which a rule separates sections."""
    notes: list[Text] = field(default_factory=list)
    """Lines printed under the table in every form (legends, what was left out and why)."""
    key_columns: int = 1
    """How many leading columns name a row: the heading of a row's block in the record form, and the
    columns a moved group's table repeats."""

    def add_row(self, *cells: Cell, end_section: bool = False) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: a row of {len(cells)} cells for {len(self.columns)} columns")
        # Text, never a str: Rich would read "[...]" in an id or an error as markup.
        self.rows.append([cell if isinstance(cell, Text) else Text(cell) for cell in cells])
        if end_section:
            self.section_ends.add(len(self.rows) - 1)

    def end_section(self) -> None:
        if self.rows:
            self.section_ends.add(len(self.rows) - 1)

    def note(self, text: str | Text, style: str = "dim") -> None:
        self.notes.append(text if isinstance(text, Text) else Text(text, style=style))

    def groups(self) -> list[str]:
        return list(dict.fromkeys(c.group for c in self.columns if c.group is not None))

    def select(self, keep: Sequence[int], title: str) -> Grid:
        """The same rows over the columns at `keep` (their order), without the notes."""
        return Grid(
            title=title,
            columns=[self.columns[i] for i in keep],
            rows=[[row[i] for i in keep] for row in self.rows],
            section_ends=set(self.section_ends),
            key_columns=sum(1 for i in keep if i < self.key_columns),
        )

    @property
    def is_empty(self) -> bool:
        return not self.rows


def text_of(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell
