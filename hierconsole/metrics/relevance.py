"""H-AP's relevance of an item, per query, from its depth: HAPPIER's two kinds (`scan` computes H-AP)."""

from __future__ import annotations

import numpy as np

RELEVANCES = ("pop", "map")
"""HAPPIER's kinds of relevance (`relevance`)."""


def relevance(counts: np.ndarray, kind: str = "pop", alpha: float = 1.0) -> np.ndarray:
    """float64 [q, K]: the relevance of an item at each tree distance l < K, 0 where none lies.

    HAPPIER's two kinds, from the counts [q, K + 1] of gallery items at each tree distance:
    - ``pop`` (their evaluation default): (s / K)^alpha / N_s at depth s = K - l, N_s the items at that
      depth, so that every depth weighs (s / K)^alpha in all however many items it holds (H-AP does not
      change with a common scale, so their s / (K - 1) gives the same value);
    - ``map``: sum over s' = 1..s of (1 / K) / N_{>=s'}, N_{>=s'} the items sharing at least s' levels,
      under which H-AP is the mean of the K levels' non-strict APs.
    """
    if kind not in RELEVANCES:
        raise ValueError(f"unknown relevance {kind!r}: use one of {', '.join(RELEVANCES)}")
    levels = counts.shape[1] - 1
    n = counts[:, :levels].astype(np.float64)
    depth = levels - np.arange(levels, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "pop":
            rel = (depth / levels) ** alpha / n
        else:
            at_least = np.cumsum(n, axis=1)  # [:, l]: the items sharing at least depth K - l
            rel = np.cumsum(((1.0 / levels) / at_least)[:, ::-1], axis=1)[:, ::-1]
    return np.where(n > 0, rel, 0.0)
