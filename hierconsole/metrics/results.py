"""What :func:`hierconsole.metrics.evaluate` returns: every metric per query, and its means.

Per-level metrics (mAP, R@k) are kept per level; the others read the whole tree and are kept under
:data:`HIERARCHY`. A mean is taken over the queries a metric is defined for (a valid query at a level; a
query with something relevant; a query with a mistake in its first k): ``micro`` averages those queries,
``macro`` first averages each group (the query's code at that level; its leaf for the tree-wide metrics),
then the groups with equal weight. CPCC is one number for the gallery, the same under both.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierconsole.levels import WHOLE_TREE
from hierconsole.vocabulary import AGGREGATIONS, MACRO, MICRO, Aggregation

HIERARCHY = WHOLE_TREE
"""The key of the metrics that read the whole tree (H-AP, ASI, NDCG@k, mistake severity@k, CPCC)."""


@dataclass(frozen=True, eq=False)
class Results:
    """Every requested metric of one query set against one gallery."""

    levels: tuple[Hashable, ...]
    """The level names (or indices), leaf first."""
    metrics: tuple[str, ...]
    """The requested metric names, in the order asked."""
    per_level: dict[str, np.ndarray]
    """metric -> float64 [Q, K]: each query's value at each level, NaN where it is not defined."""
    per_query: dict[str, np.ndarray]
    """metric -> float64 [Q]: each query's value of a tree-wide metric, NaN where it is not defined."""
    query_labels: np.ndarray
    """int64 [Q, K]: the queries' codes, whose columns group them under ``macro``."""
    cpcc: float | None = None
    aggregate: Aggregation = MICRO
    """The aggregation ``to_dict`` uses unless told otherwise."""

    def to_dict(self, aggregate: Aggregation | None = None) -> dict[Hashable, dict[str, float]]:
        """{level: {metric: mean}} for the per-level metrics, and {HIERARCHY: {metric: mean}} for the rest."""
        return {key: {m: v[0] for m, v in entry.items()} for key, entry in self._table(aggregate).items()}

    def defined(self, aggregate: Aggregation | None = None) -> dict[Hashable, dict[str, int]]:
        """How many queries (``macro``: groups) each mean of :meth:`to_dict` is over."""
        return {key: {m: v[1] for m, v in entry.items()} for key, entry in self._table(aggregate).items()}

    def to_polars(self, aggregate: Aggregation | None = None) -> Any:
        """A polars frame with a row per (level, metric): level, metric, value, queries (or groups)."""
        import polars as pl

        rows = [
            {"level": str(key), "metric": m, "value": v[0], "defined": v[1]}
            for key, entry in self._table(aggregate).items()
            for m, v in entry.items()
        ]
        return pl.DataFrame(rows, schema={"level": pl.String, "metric": pl.String, "value": pl.Float64, "defined": pl.Int64})

    def _table(self, aggregate: Aggregation | None) -> dict[Hashable, dict[str, tuple[float, int]]]:
        how = self.aggregate if aggregate is None else aggregate
        if how not in AGGREGATIONS:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATIONS)}, got {how!r}")
        out: dict[Hashable, dict[str, tuple[float, int]]] = {}
        for i, level in enumerate(self.levels):
            entry = {m: _mean(v[:, i], self.query_labels[:, i], how) for m, v in self.per_level.items()}
            if entry:
                out[level] = entry
        tree_wide = {m: _mean(v, self.query_labels[:, 0], how) for m, v in self.per_query.items()}
        if self.cpcc is not None:
            tree_wide["CPCC"] = (self.cpcc, 1)
        if tree_wide:
            out[HIERARCHY] = {m: tree_wide[m] for m in self.metrics if m in tree_wide}
        return out


def _mean(values: np.ndarray, groups: np.ndarray, how: Aggregation) -> tuple[float, int]:
    defined = ~np.isnan(values)
    values, groups = values[defined], groups[defined]
    if values.size == 0:
        return float("nan"), 0
    if how == MACRO:
        _, group_of = np.unique(groups, return_inverse=True)
        sums = np.bincount(group_of, weights=values)
        values = sums / np.bincount(group_of)
    return float(values.mean()), int(values.size)
