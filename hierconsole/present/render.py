"""The one renderer: a `Grid` as Rich renderables that fit a width without cutting a number.

Forms, fullest first, the first that fits wins: the boxed table; the compact one (no vertical rules);
the same without the columns marked droppable (named in a note); those two again with labels wrapped at
their words; the compact one with each column group (the per-seed values, the intervals) moved to a
table of its own; last, a stacked record per row (`header  value` lines, every column kept), in which
every value is whole down to the width of a header plus the widest value. A form "fits" when the width
it needs with every number whole and labels at their longest word (`required_width`) is within the
width, so Rich never has to squeeze a number column.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hierconsole.present.grid import Cell, Grid, text_of

UNBOUNDED = 10_000
_measuring = Console(width=UNBOUNDED, file=io.StringIO(), color_system=None, highlight=False)


FOLD_WIDTH = 16
"""The narrowest a foldable label column is asked to be."""


def _longest_word(cell: Cell, cap: int | None = None) -> Text:
    words = text_of(cell).split()
    word = max(words, key=len) if words else ""
    return Text(word[:cap] if cap else word)


def required_width(grid: Grid, *, compact: bool) -> int:
    """Cells the table form of `grid` needs so that no number is cut: its width with every number cell
    whole and every label at its longest word. (Rich's own minimum lets a no-wrap column shrink to its
    longest word too, and then squeezes it, which is the cut this layer exists to prevent.)"""
    shadow = Grid(
        title="",
        columns=[replace(c, header=c.header if c.numeric else text_of(_longest_word(c.header))) for c in grid.columns],
        rows=[
            [
                cell if c.numeric else _longest_word(cell, FOLD_WIDTH if c.foldable else None)
                for c, cell in zip(grid.columns, row, strict=True)
            ]
            for row in grid.rows
        ],
    )
    return natural_width(rich_table(shadow, compact=compact))


def minimum_width(renderable: RenderableType) -> int:
    """Cells `renderable` cannot go below (a text's longest word)."""
    return Measurement.get(_measuring, _measuring.options, renderable).minimum


def natural_width(renderable: RenderableType) -> int:
    """Cells `renderable` takes unsqueezed (one line per cell)."""
    if isinstance(renderable, Table):
        width = table_width(renderable)
        if width is not None:
            return width
    return Measurement.get(_measuring, _measuring.options, renderable).maximum


def table_width(table: Table) -> int | None:
    """What Rich measures as `table`'s natural width, counted from its cells' text: each column's widest
    line plus its padding, plus the rules. Rich's own measure lays every cell out twice, which made
    measuring the forms most of the time `effects` took; this is the same sum without the layout (tested
    against Rich's). None where it would not be the same (a cell that is not text, options these tables
    never set, a width at the measuring console's limit): the caller then asks Rich."""
    n = len(table.columns)
    if not n or table.width is not None or table.min_width is not None or table.show_footer or table.collapse_padding:
        return None
    _, right, _, left = table.padding
    total = (2 if table.box and table.show_edge else 0) + (n - 1 if table.box else 0)
    for i, column in enumerate(table.columns):
        if column.min_width is not None or column.max_width is not None:
            return None
        pad = (0 if i == 0 and not table.pad_edge else left) + (0 if i == n - 1 and not table.pad_edge else right)
        if column.width is not None:
            total += column.width + pad
            continue
        cells = [column.header, *column._cells] if table.show_header else list(column._cells)
        if not cells:
            return None
        widest = 0
        for cell in cells:
            text = _measuring.render_str(cell, highlight=False) if isinstance(cell, str) else cell
            if not isinstance(text, Text):
                return None
            widest = max(widest, max((cell_len(line) for line in text.plain.splitlines()), default=0))
        total += widest + pad
    return total if total < UNBOUNDED else None


def _longest_line(cell: Cell) -> int:
    return max((cell_len(line) for line in text_of(cell).splitlines()), default=0)


def _shortest_fit(cell: Cell) -> int:
    return max((cell_len(word) for word in text_of(cell).split()), default=0)


def label_widths(grid: Grid, table_width: int, width: int) -> dict[int, int]:
    """Widths for the label columns so that a table `table_width` wide fits `width`: the widest labels
    give up cells first, none below its longest word (Rich's own squeeze takes from the widest column,
    which folds an id mid-word while a date beside it could have wrapped at its space)."""
    excess = table_width - width
    if excess <= 0:
        return {}
    natural = {
        i: max([_longest_line(c.header), *(_longest_line(r[i]) for r in grid.rows)])
        for i, c in enumerate(grid.columns)
        if not c.numeric
    }
    floor = {
        i: min(
            max([_shortest_fit(grid.columns[i].header), *(_shortest_fit(r[i]) for r in grid.rows)]),
            FOLD_WIDTH if grid.columns[i].foldable else UNBOUNDED,
        )
        for i in natural
    }
    widths = dict(natural)
    while excess > 0:
        give = [i for i in widths if widths[i] > floor[i]]
        if not give:
            break
        widest = max(give, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return {i: w for i, w in widths.items() if w != natural[i]}


def rich_table(grid: Grid, *, compact: bool, width: int | None = None) -> Table:
    style: dict = (
        {"box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False, "padding": (0, 0, 0, 1)}
        if compact
        else {"box": box.HEAVY_HEAD}
    )
    table = Table(title=grid.title or None, title_justify="left", title_style="bold", **style)
    widths: dict[int, int] = {}
    if width is not None:
        widths = label_widths(grid, natural_width(rich_table(grid, compact=compact)), width)
    for i, column in enumerate(grid.columns):
        table.add_column(
            column.header,
            width=widths.get(i),
            justify="right" if column.numeric else "left",
            no_wrap=column.numeric,
            overflow="fold",
            style=column.style,
            header_style=column.header_style or "bold",
        )
    for i, row in enumerate(grid.rows):
        table.add_row(*row, end_section=i in grid.section_ends and i < len(grid.rows) - 1)
    return table


def records(grid: Grid) -> RenderableType:
    """Each row as a block: its labels as a heading, then one `header  value` line per other column.
    A blank label under a label reads as the one above it (tables write a repeated label once)."""
    lead = list(range(min(grid.key_columns, len(grid.columns))))
    carried: dict[int, str] = {}
    blocks: list[RenderableType] = [Text(grid.title, style="bold")] if grid.title else []
    for r, row in enumerate(grid.rows):
        for i in lead:
            if text_of(row[i]).strip():
                carried[i] = text_of(row[i])
        heading = Text(" · ".join(carried.get(i, "") for i in lead if carried.get(i)), style="bold")
        body = Table(box=None, show_header=False, padding=(0, 0, 0, 2), pad_edge=False)
        body.add_column(no_wrap=False, overflow="fold", style="dim")
        body.add_column(no_wrap=False, overflow="fold")
        for i, (column, cell) in enumerate(zip(grid.columns, row, strict=True)):
            if i in lead or not text_of(cell).strip():
                continue
            value = cell.copy() if isinstance(cell, Text) else Text(cell)
            value.no_wrap = column.numeric  # a number stays on one line; a label (evidence, an error) wraps
            body.add_row(column.record_header or column.header, value)
        blocks += [heading, body]
        if r in grid.section_ends:
            blocks.append(Text(""))
    return Group(*blocks)


def _split(grid: Grid) -> tuple[Grid, list[Grid], Text] | None:
    """`grid` without its grouped columns, the groups as tables of their own (with the labels), and the
    note that says where they went; None without groups."""
    groups = grid.groups()
    if not groups:
        return None
    grouped = {i for i, c in enumerate(grid.columns) if c.group is not None}
    keys = list(range(grid.key_columns))
    main = grid.select([i for i in range(len(grid.columns)) if i not in grouped], grid.title)
    moved = [grid.select(keys + [i for i, c in enumerate(grid.columns) if c.group == g], g) for g in groups]
    for m in moved:  # a moved group is a table of its own: nothing left in it to move again
        m.columns = [replace(c, group=None) for c in m.columns]
    where = "in the tables below" if len(groups) > 1 else "in the table below"
    note = Text(f"({'; '.join(groups)}: {where})", style="dim")
    return main, moved, note


def spilled(grid: Grid) -> list[RenderableType]:
    """The non-empty cells of the spill columns as lines under the table: "<row key> <header>: <text>"."""
    lines: list[RenderableType] = []
    for i, column in enumerate(grid.columns):
        if not column.spill:
            continue
        for row in grid.rows:
            cell = row[i]
            text = cell if isinstance(cell, Text) else Text(cell)
            if text.plain.strip():
                key = " ".join(str(c) for c in row[: grid.key_columns] if str(c))
                lines.append(Text.assemble((f"{key} {column.header}: ", "bold"), text))
    return lines


def forms(grid: Grid, width: int, *, boxed: bool = True) -> Iterator[tuple[list[RenderableType], int]]:
    """Each form, fullest first, with the width it needs to show every number whole: one line per cell
    (boxed, then compact, then without the droppable columns) before labels wrap, before groups move
    out, before the record form."""
    dropped = [c.header for c in grid.columns if c.droppable and not c.spill]
    narrow = (
        grid.select([i for i, c in enumerate(grid.columns) if not c.droppable], grid.title)
        if any(c.droppable for c in grid.columns)
        else grid
    )
    left_out: list[RenderableType] = spilled(grid)
    if dropped:
        left_out.append(
            Text(f"(left out at this width: {', '.join(dropped)}; a wider view shows every column)", style="dim")
        )
    variants: list[tuple[Grid, list[RenderableType]]] = [(grid, [])] + ([(narrow, left_out)] if narrow is not grid else [])
    if boxed:
        table = rich_table(grid, compact=False)
        yield [table], natural_width(table)
    for g, notes in variants:
        table = rich_table(g, compact=True)
        yield [table, *notes], natural_width(table)
    for g, notes in variants:
        yield [rich_table(g, compact=True, width=width), *notes], required_width(g, compact=True)
    split = _split(narrow)
    if split is not None:
        main, moved, note = split
        # The table that keeps the rest must fit as a table; each moved group takes whatever form fits.
        parts: list[RenderableType] = [rich_table(main, compact=True, width=width)]
        parts += spilled(grid)
        if dropped:
            parts.append(Text(f"(left out at this width: {', '.join(dropped)})", style="dim"))
        parts.append(note)
        for m in moved:
            parts += render(m, width, boxed=False)
        yield parts, required_width(main, compact=True)
    yield [records(grid)], 0


def fits(grid: Grid, width: int) -> bool:
    """Whether `grid` fits `width` as one compact table, every number whole and no column left out."""
    return required_width(grid, compact=True) <= width


def render(grid: Grid, width: int, *, boxed: bool = True) -> list[RenderableType]:
    """The fullest form of `grid` whose every part fits `width`, then its notes. `boxed=False` starts
    from the compact form (the tables a narrow form moved out, drawn as the one they left)."""
    chosen: list[RenderableType] = []
    for form, needed in forms(grid, width, boxed=boxed):
        chosen = form
        if needed <= width:
            break
    return [*chosen, *grid.notes]
