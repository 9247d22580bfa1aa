"""The distances the metrics rank and compare by, in NumPy: a name, or a function of one's own.

Distances keep the embeddings' precision: float32 embeddings are compared in float32 (as the study's
engine ranks them, and twice as fast), anything else in float64.

The built-in distances are prepared once per gallery (its squared norms, its transpose) and then write
each query chunk's distances into a buffer the caller keeps: at 10^6 gallery items a fresh [chunk, G]
array per chunk costs more in page faults than the product itself. Their inner products are summed by
`squared_gaps` in one fixed order for every (query, item) pair, so a query's distances, and so its
ranking, are the same bits whatever chunk it is scored in and on whichever thread: a BLAS product's are
not (its blocking depends on the chunk's shape, and its last bits with it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

Distance = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(x [n, D], y [m, D]) -> [n, m] distances."""
ToGallery = Callable[[np.ndarray, np.ndarray | None], np.ndarray]
"""(x [n, D], out [n, G] or None) -> the distances of x to one prepared gallery (in ``out`` if given)."""


@njit(nogil=True, cache=True)
def squared_gaps(x: np.ndarray, y_t: np.ndarray, x2: np.ndarray, y2: np.ndarray, out: np.ndarray) -> None:
    """out[i, j] = max(|x_i|^2 + |y_j|^2 - 2 <x_i, y_j>, 0), the inner product summed over the dimensions
    in order; ``y_t`` is the gallery transposed [D, G], ``x2`` and ``y2`` the squared norms."""
    n, dims = x.shape
    block = 1024  # gallery items whose partial sums stay in the L1 cache while the dimensions go by
    for j0 in range(0, y_t.shape[1], block):
        j1 = min(j0 + block, y_t.shape[1])
        for i in range(n):
            row = out[i, j0:j1]
            row[:] = 0
            for k in range(dims):
                xk = x[i, k]
                yk = y_t[k, j0:j1]
                for j in range(j1 - j0):
                    row[j] += xk * yk[j]
            for j in range(j1 - j0):
                v = -2 * row[j] + x2[i] + y2[j0 + j]
                row[j] = v if v > 0 else 0


def _gaps_to(y: np.ndarray) -> Callable[[np.ndarray, np.ndarray | None], tuple[np.ndarray, np.ndarray]]:
    """(x, out) -> (|x - y|^2 [n, G] in ``out`` or a new array, |x|^2) for the gallery ``y``."""
    y_t, y2 = np.ascontiguousarray(y.T), (y * y).sum(1)

    def gaps(x: np.ndarray, out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        x = np.ascontiguousarray(x, dtype=y.dtype)
        out = np.empty((len(x), len(y)), dtype=y.dtype) if out is None else out
        x2 = (x * x).sum(1)
        squared_gaps(x, y_t, x2, y2, out)
        return out, x2

    return gaps


class Euclidean:
    """Plain Euclidean distance (normalise the embeddings first for the study's Euclidean geometry)."""

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.to(y)(x, None)

    def to(self, y: np.ndarray) -> ToGallery:
        gaps = _gaps_to(y)

        def distances(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
            d, _ = gaps(x, out)
            return np.sqrt(d, out=d)

        return distances


@dataclass(frozen=True)
class Poincare:
    """The Poincaré ball of curvature -c: acosh(1 + 2c|x-y|^2 / ((1-c|x|^2)(1-c|y|^2))) / sqrt(c)."""

    c: float = 1.0

    def __post_init__(self) -> None:
        if not self.c > 0:
            raise ValueError(f"the Poincaré ball's curvature c must be > 0, not {self.c}")

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.to(y)(x, None)

    def _inside(self, x: np.ndarray) -> np.ndarray:
        x2 = (x * x).sum(1)
        if (self.c * x2 >= 1).any():
            raise ValueError(f"embeddings must lie inside the ball |x| < 1/sqrt(c) = {1 / np.sqrt(self.c):.6g}")
        return x2

    def to(self, y: np.ndarray) -> ToGallery:
        c = self.c
        y_scale = 1.0 / (1.0 - c * self._inside(y))
        gaps = _gaps_to(y)

        def distances(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
            self._inside(x)
            d, x2 = gaps(x, out)  # |x - y|^2
            d *= (2.0 * c / (1.0 - c * x2))[:, None]
            d *= y_scale[None, :]
            d += 1.0
            np.arccosh(d, out=d)
            d /= float(np.sqrt(c))  # a Python float keeps float32 arrays float32
            return d

        return distances


def poincare(c: float = 1.0) -> Poincare:
    """The Poincaré ball's distance at curvature -c."""
    return Poincare(c)


euclidean = Euclidean()
DISTANCES: dict[str, Distance] = {"euclidean": euclidean, "poincare": Poincare()}
"""The distances by name (`poincare`: curvature 1; :func:`poincare` builds another)."""


def resolve(distance: str | Distance) -> Distance:
    """A distance by name, or the function given."""
    if isinstance(distance, str):
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}: use one of {', '.join(DISTANCES)}, or a function")
        return DISTANCES[distance]
    if not callable(distance):
        raise ValueError(f"a distance is a name ({', '.join(DISTANCES)}) or a function, not {distance!r}")
    return distance


def to_gallery(distance: str | Distance, y: np.ndarray) -> ToGallery:
    """The distances of query chunks to the gallery ``y``, checked for shape and in its precision.

    A built-in distance writes into ``out``; a function of one's own is called as (x, y) and ``out`` is
    left unused."""
    fn = resolve(distance)
    dtype = y.dtype
    if isinstance(fn, Euclidean | Poincare):
        return fn.to(y)

    def distances(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        d = np.asarray(fn(x, y), dtype=dtype)
        if d.shape != (len(x), len(y)):
            raise ValueError(f"the distance gave shape {d.shape} for {len(x)} x {len(y)} rows")
        return d

    return distances


def pairwise_distances(x: np.ndarray, y: np.ndarray, distance: str | Distance = "euclidean") -> np.ndarray:
    """[n, m] distances between the rows of ``x`` and ``y``: float32 when both are float32, else float64."""
    dtype = np.float32 if np.asarray(x).dtype == np.float32 and np.asarray(y).dtype == np.float32 else np.float64
    return to_gallery(distance, np.asarray(y, dtype=dtype))(np.asarray(x, dtype=dtype), None)
