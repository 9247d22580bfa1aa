"""A study's split plan as a `Grid`: each split, its images and where they come from, with notes on what
was carved out of what (the plan `run` prints at its start and `run --dry-run` prints alone)."""

from __future__ import annotations

from collections.abc import Sequence

from hierconsole.present import numbers
from hierconsole.present.grid import Column, Grid
from hierconsole.study.run.drawn_splits import PlanRow


def split_plan_grid(rows: Sequence[PlanRow], notes: Sequence[str], title: str = "split plan") -> Grid:
    grid = Grid(
        title,
        [Column("split", numeric=False), Column("images"), Column("from", numeric=False)],
    )
    for row in rows:
        grid.add_row(row.split, numbers.whole(row.images), row.source)
    for note in notes:
        grid.note(note)
    return grid
