"""Arm summaries: mean and sample SD over training seeds per arm and metric (paper Table 1 / S8)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from hierconsole.factorial import cells_in_order
from hierconsole.study.analysis.per_seed import DEFAULT_SOURCE, baseline_values, indexed_cells
from hierconsole.study.analysis.statistics import mean_sd
from hierconsole.vocabulary import BASELINE_SEED


def arm_table(
    per_seed: pl.DataFrame,
    metrics: Sequence[str] | str | None = None,
    *,
    source: str = DEFAULT_SOURCE,
    baselines: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Mean and sample SD over seeds per arm and metric (paper Table 1 / S8), long format.

    Columns: arm, metric, mean, sd, n. Arms appear in the factorial's order, only if present; seeds need not
    be paired here (a running study may have finished some cells). ``sd`` is null when n == 1.
    ``baselines`` (see :func:`baselines_from_long`) adds their rows after the arms: the one value of an
    untrained baseline, sd and n null, since it has no training seed; mean, SD and n over the seeds of a
    trained one (HIER-style).
    """
    names, cells = indexed_cells(per_seed, metrics, source)
    rows: list[dict[str, object]] = []
    for arm in cells_in_order(a for a, _ in cells):
        seeds = sorted(seed for a, seed in cells if a == arm)
        if not seeds:
            continue
        for m in names:
            mean, sd = mean_sd([cells[(arm, s)][m] for s in seeds])
            rows.append({"arm": arm, "metric": m, "mean": mean, "sd": sd, "n": len(seeds)})
    for arm, by_seed in baseline_values(baselines, names, source).items():
        if BASELINE_SEED in by_seed:  # untrained: one value, no seed
            rows += [{"arm": arm, "metric": m, "mean": by_seed[BASELINE_SEED][m], "sd": None, "n": None} for m in names]
            continue
        for m in names:  # trained per seed (HIER-style): summarised over its seeds like a cell
            mean, sd = mean_sd([values[m] for _, values in sorted(by_seed.items())])
            rows.append({"arm": arm, "metric": m, "mean": mean, "sd": sd, "n": len(by_seed)})
    return pl.DataFrame(
        rows,
        schema={"arm": pl.String, "metric": pl.String, "mean": pl.Float64, "sd": pl.Float64, "n": pl.Int64},
    )
