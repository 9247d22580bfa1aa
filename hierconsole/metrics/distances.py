"""The distances the metrics rank and compare by, in NumPy float64: a name, or a function of one's own."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Distance = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(x [n, D], y [m, D]) -> [n, m] distances."""


def euclidean(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Plain Euclidean distance (normalise the embeddings first for the study's Euclidean geometry)."""
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * (x @ y.T)
    return np.sqrt(np.maximum(sq, 0.0))


def poincare(c: float = 1.0) -> Distance:
    """The Poincaré ball of curvature -c: acosh(1 + 2c|x-y|^2 / ((1-c|x|^2)(1-c|y|^2))) / sqrt(c)."""
    if not c > 0:
        raise ValueError(f"the Poincaré ball's curvature c must be > 0, not {c}")

    def distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x2, y2 = (x * x).sum(1), (y * y).sum(1)
        if (c * x2 >= 1).any() or (c * y2 >= 1).any():
            raise ValueError(f"embeddings must lie inside the ball |x| < 1/sqrt(c) = {1 / np.sqrt(c):.6g}")
        gap = np.maximum(x2[:, None] + y2[None, :] - 2.0 * (x @ y.T), 0.0)
        arg = 1.0 + 2.0 * c * gap / ((1.0 - c * x2)[:, None] * (1.0 - c * y2)[None, :])
        return np.arccosh(arg) / np.sqrt(c)

    return distance


DISTANCES: dict[str, Distance] = {"euclidean": euclidean, "poincare": poincare()}
"""The distances by name (`poincare`: curvature 1; :func:`poincare` builds another)."""


def pairwise_distances(x: np.ndarray, y: np.ndarray, distance: str | Distance = "euclidean") -> np.ndarray:
    """[n, m] float64 distances between the rows of ``x`` and ``y``."""
    if isinstance(distance, str):
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}: use one of {', '.join(DISTANCES)}, or a function")
        distance = DISTANCES[distance]
    d = np.asarray(distance(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)), dtype=np.float64)
    if d.shape != (len(x), len(y)):
        raise ValueError(f"the distance gave shape {d.shape} for {len(x)} x {len(y)} rows")
    return d
