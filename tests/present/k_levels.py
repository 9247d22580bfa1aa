"""Hand-made results of a K-level study (no trained home): an arm table and a redistribution over K levels,
and a check that a rendered grid shows every number whole within a width."""

from __future__ import annotations

import io

import polars as pl
from rich.console import Console

from hierconsole.factorial import EFFECTS, REDISTRIBUTION_CONTRASTS
from hierconsole.levels import Levels
from hierconsole.present.grid import Grid, text_of
from hierconsole.present.render import render
from hierconsole.study.analysis.effects import Effect
from hierconsole.study.analysis.redistribution import Redistribution
from hierconsole.vocabulary import ARMS, HIER_METRIC, UNTRAINED_BASELINES

SEEDS = (0, 1, 2)

INAT7 = Levels.of(("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom"))


def levels_k(k: int) -> Levels:
    """K levels with names from the data: iNaturalist's seven ranks, else Level 1 .. K."""
    return INAT7 if k == 7 else Levels.default(k)


def arm_table_k(levels: Levels, measure: str = "mAP", recall: tuple[int, ...] = ()) -> pl.DataFrame:
    """The four cells over three seeds and one untrained baseline, a value at every level and hier (and
    Recall@k at every level for each k of `recall`)."""
    metrics = [f"{c}_{measure}" for c in levels.codes] + ([HIER_METRIC] if measure == "mAP" else [])
    metrics += [f"{c}_R@{k}" for c in levels.codes for k in recall]
    rows: list[dict[str, object]] = []
    for a, arm in enumerate(ARMS):
        for m, metric in enumerate(metrics):
            rows.append({"arm": arm, "metric": metric, "mean": 0.1234 + 0.01 * a + 0.02 * m, "sd": 0.0123, "n": 3})
    for m, metric in enumerate(metrics):
        rows.append({"arm": UNTRAINED_BASELINES[0], "metric": metric, "mean": 0.05 + 0.01 * m, "sd": None, "n": None})
    return pl.DataFrame(
        rows, schema={"arm": pl.String, "metric": pl.String, "mean": pl.Float64, "sd": pl.Float64, "n": pl.Int64}
    )


def redistribution_k(levels: Levels, metric: str = "mAP") -> Redistribution:
    """H − E per level: every finer level down, the top up (the paper's pattern) in every seed."""
    contrasts: dict[str, dict[str, Effect]] = {}
    for c in REDISTRIBUTION_CONTRASTS:
        by_level = {}
        for i, code in enumerate(levels.codes):
            sign = 1.0 if i == levels.k - 1 else -1.0
            per_unit = {s: sign * (0.0123 + 0.001 * i + 0.0005 * s) for s in SEEDS}
            by_level[code] = Effect(per_unit=per_unit, metric=f"{code}_{metric}", name=c, definition=EFFECTS[c])
        contrasts[c] = by_level
    return Redistribution(
        metric=metric,
        contrasts=contrasts,
        pattern={c: True for c in contrasts},
        seeds_with_pattern={c: len(SEEDS) for c in contrasts},
        n_seeds=len(SEEDS),
    )


def rendered(grid: Grid, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    for part in render(grid, width):
        console.print(part)
    return console.file.getvalue()  # type: ignore[attr-defined]


def assert_whole(grid: Grid, width: int = 80) -> str:
    """Every numeric cell of `grid` appears whole on one line of its rendering at `width`, and no line is
    wider than `width`; the rendering, for further checks."""
    out = rendered(grid, width)
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    for i, column in enumerate(grid.columns):
        if not column.numeric or column.droppable:  # a droppable column may go; the form says so
            continue
        for row in grid.rows:
            value = text_of(row[i]).strip()
            if value:
                assert any(value in line for line in lines), f"{column.header}: {value!r} cut or missing\n{out}"
    return out
