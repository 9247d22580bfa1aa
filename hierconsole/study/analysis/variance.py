"""Variance components of the arm metrics: how much of the spread is training seeds, how much Q/G draws.

Works on per-perturbation tables (`per_seed.per_perturbation_from_long`, and
`per_seed.baseline_perturbations_from_long` for the baseline arms), since the per-seed table has already
averaged the query/gallery draws away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from hierconsole.factorial import arms_in_order
from hierconsole.study.analysis.per_seed import KEY_COLUMNS, PERTURBATION, metric_order_for, table_levels
from hierconsole.study.analysis.statistics import variance_components

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

VARIANCE_SCHEMA: dict[str, PolarsDataType] = {
    "arm": pl.String,
    "metric": pl.String,
    "n_seeds": pl.Int64,
    "n_perturbations": pl.Int64,
    "between_seed_var": pl.Float64,
    "within_seed_var": pl.Float64,
    "seed_var": pl.Float64,
}
"""between_seed_var: sample variance of the seed means; within_seed_var: sample variance over a seed's Q/G
perturbations, averaged over seeds; seed_var: the seeds' own share, between - within / P, floored at 0
(`statistics.VarianceComponents`)."""


def arm_variance(
    per_perturbation: pl.DataFrame, metrics: Sequence[str] | None = None
) -> pl.DataFrame:
    """One row per (arm, metric) of a per-perturbation table (any of its arms, cells then baselines)."""
    names = [
        c for c in per_perturbation.columns if c not in (*KEY_COLUMNS, PERTURBATION) and (metrics is None or c in metrics)
    ]
    names.sort(key=metric_order_for(table_levels(names)))
    present = set(per_perturbation["arm"].to_list()) if "arm" in per_perturbation.columns else set()
    rows = []
    for arm in arms_in_order(present):
        part = per_perturbation.filter(pl.col("arm") == arm)
        seeds = sorted(set(part["seed"].to_list()))
        for m in names:
            groups = [part.filter(pl.col("seed") == s)[m].to_list() for s in seeds]
            vc = variance_components(groups)
            rows.append(
                {
                    "arm": arm,
                    "metric": m,
                    "n_seeds": vc.n_seeds,
                    "n_perturbations": vc.n_perturbations,
                    "between_seed_var": vc.between_seed,
                    "within_seed_var": vc.within_seed,
                    "seed_var": vc.seed,
                }
            )
    return pl.DataFrame(rows, schema=VARIANCE_SCHEMA)
