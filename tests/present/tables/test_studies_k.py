"""The datasets table with trees of any depth: three levels as before, a deeper one as `K · leaf→top`,
every number whole at 80 columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from hierconsole.levels import Levels
from hierconsole.present.tables.studies import datasets_grid
from hierconsole.study.db.catalog import DatasetInfo
from tests.present.k_levels import assert_whole, levels_k


def _info(dataset_id: str, names: tuple[str, ...], counts: tuple[int, ...]) -> DatasetInfo:
    return DatasetInfo(
        dataset_id=dataset_id, kind="generic", n_samples=500_000, dim=512, n_leaf=counts[0],
        n_train=300_000, n_val=100_000, n_test=100_000, level_names=names, sha256="ab" * 32,
        artifact_dir=Path("/nowhere"), level_codes=Levels.of(names).codes, level_counts=counts,
    )


def test_three_levels_read_as_before():
    grid = datasets_grid([_info("cub", ("Class", "Genus", "Family"), (200, 122, 37))])
    assert [c.header for c in grid.columns][4:6] == ["levels", "leaf/middle/high"]
    assert [c.plain for c in grid.rows[0][4:6]] == ["Class/Genus/Family", "200/122/37"]


@pytest.mark.parametrize("k", (2, 7, 12))
def test_a_tree_of_any_depth_shows_its_depth_leaf_and_top(k):
    levels = levels_k(k)
    counts = tuple(10_000 // (i + 1) for i in range(k))
    grid = datasets_grid([_info("deep", levels.names, counts), _info("cub", ("Class", "Genus", "Family"), (200, 122, 37))])
    assert grid.columns[5].header == "groups per level"
    names, numbers = (c.plain for c in grid.rows[0][4:6])
    if k == 2:
        assert (names, numbers) == ("/".join(levels.names), "10000/5000")
    else:
        assert names == f"{k} · {levels.names[0]}→{levels.names[-1]}"
        assert numbers == f"{k} · 10000→{counts[-1]}"
    assert [c.plain for c in grid.rows[1][4:6]] == ["Class/Genus/Family", "200/122/37"]
    assert_whole(grid)
