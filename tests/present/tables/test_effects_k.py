"""The effects tables of a K-level study (K = 2, 5, 7, 12): a row per level, the redistribution with the
levels down beyond three levels, every number whole at 80 columns; three levels exactly as before."""

from __future__ import annotations

import pytest

from hierconsole.present.levels import PAPER
from hierconsole.present.tables.effects import levels_grid, redistribution_bars_grid, redistribution_grid
from tests.present.k_levels import arm_table_k, assert_whole, levels_k, redistribution_k

DEPTHS = (2, 5, 7, 12)


@pytest.mark.parametrize("k", DEPTHS)
def test_levels_grid_has_a_row_per_level_then_hier(k):
    levels = levels_k(k)
    grid = levels_grid(arm_table_k(levels), "mAP", 3, levels)
    assert grid is not None
    assert [r[0].plain for r in grid.rows] == [*levels.codes, "hier"]
    assert len(grid.columns) == 1 + 4 + 1  # level, the four cells, the baseline: depth adds rows only
    assert_whole(grid)


@pytest.mark.parametrize("k", DEPTHS)
def test_redistribution_puts_the_levels_down_beyond_three(k):
    levels = levels_k(k)
    grid = redistribution_grid(redistribution_k(levels), 3, width=80)
    first = [r[0].plain for r in grid.rows]
    if k == 2:  # two levels fit as columns: the paper's layout
        assert [c.header for c in grid.columns][1:3] == list(levels.codes)
    else:
        assert first == [*levels.codes, "pattern", "seeds"]
        assert [c.header for c in grid.columns] == ["level", "geom_S (H_S - E_S)", "geom_R (H_R - E_R)"]
        assert [r[1].plain for r in grid.rows[-2:]] == ["yes", "3/3"]
    out = assert_whole(grid)
    assert "+0.0" in out


def test_three_levels_keep_the_paper_layout_at_any_width():
    result = redistribution_k(PAPER)
    wide = redistribution_grid(result, 3)
    assert [c.header for c in wide.columns] == ["contrast", "leaf", "middle", "high", "pattern", "seeds"]
    assert redistribution_grid(result, 3, width=200).columns == wide.columns
    # A narrow terminal shows the paper's table as it always has (the renderer narrows it), never transposed.
    assert redistribution_grid(result, 3, width=40).columns == wide.columns


@pytest.mark.parametrize("k", DEPTHS)
def test_redistribution_bars_per_level_and_narrowed_to_one(k):
    levels = levels_k(k)
    result = redistribution_k(levels)
    grid = redistribution_bars_grid(result, 3)
    shown = [r[1].plain for r in grid.rows if r[1].plain]
    assert shown == [*levels.codes] * 2
    assert_whole(grid)
    one = redistribution_bars_grid(result, 3, level=levels.codes[1])
    assert [r[1].plain for r in one.rows if r[1].plain] == [levels.codes[1]] * 2
    assert one.notes[-1].plain == grid.notes[-1].plain  # one scale for every level
    assert_whole(one)
