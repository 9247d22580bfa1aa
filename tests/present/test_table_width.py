"""`table_width` (the renderer's fast measure) against Rich's own measure of the same tables."""

from __future__ import annotations

import random

from rich.measure import Measurement
from rich.text import Text

from hierconsole.present.grid import Column, Grid
from hierconsole.present.render import _measuring, required_width, rich_table, table_width

WORDS = ["0.512", "+0.169 ± 0.003", "leaf_mAP", "E_R", "[0.1, 0.2]", "✗2", "数据", "", " ", "a b  c", "x\nlonger line"]


def _random_grid(rng: random.Random) -> Grid:
    n = rng.randint(1, 6)
    columns = [
        Column(rng.choice(WORDS) or "h", numeric=rng.random() < 0.5, droppable=rng.random() < 0.2)
        for _ in range(n)
    ]
    grid = Grid(rng.choice(["", "title"]), columns)
    for _ in range(rng.randint(0, 8)):
        grid.add_row(*(rng.choice(WORDS) for _ in range(n)))
    return grid


def _rich(table) -> int:
    return Measurement.get(_measuring, _measuring.options, table).maximum


def test_the_fast_measure_is_richs():
    rng = random.Random(7)
    for _ in range(60):
        grid = _random_grid(rng)
        for compact in (False, True):
            table = rich_table(grid, compact=compact)
            assert table_width(table) == _rich(table)
            narrow = rich_table(grid, compact=compact, width=rng.randint(10, 60))
            assert table_width(narrow) == _rich(narrow)
        # The width a form needs is measured on a shadow table of the longest words: the same there.
        assert required_width(grid, compact=True) >= 0


def test_a_header_with_markup_is_measured_as_rich_reads_it():
    grid = Grid("", [Column("[bold]mean[/bold]"), Column("sd")])
    grid.add_row(Text("1"), Text("2"))
    table = rich_table(grid, compact=True)
    assert table_width(table) == _rich(table)
