"""CPCC, the cophenetic correlation of a representation with the tree: the Pearson correlation, over the
pairs of leaf classes, between the distance of their centroids and their tree distance (the height of
their lowest common ancestor, `taxonomy.relation_codes`), as used in hierarchy-aware representation work.

A class's centroid is the arithmetic mean of its embeddings' coordinates (in the Poincaré ball a mean of
points of the ball stays inside it), compared under the given distance.
"""

from __future__ import annotations

import numpy as np

from hierconsole.metrics.distances import Distance, to_gallery
from hierconsole.metrics.labels import as_embeddings, as_labels
from hierconsole.taxonomy import relation_codes

PAIRS_PER_BLOCK = 2**22
"""Pairs of leaves a block holds (its distances and tree distances: about 100 MiB of temporaries)."""


def cpcc(embeddings: np.ndarray, labels: np.ndarray, *, distance: str | Distance = "euclidean") -> float:
    """CPCC of ``embeddings`` [n, D] with labels [n, K] (leaf first); NaN when either side of the pairs
    does not vary (every centroid equidistant, or every pair of leaves at the same tree distance).

    ValueError for fewer than three leaf classes (one pair has no correlation) or for a leaf whose rows
    name different ancestors (labels that are no tree)."""
    x = as_embeddings(embeddings, "embeddings")
    lab = as_labels(labels, "labels", x.shape[0])
    leaves, first, inverse = np.unique(lab[:, 0], return_index=True, return_inverse=True)
    if leaves.size < 3:
        raise ValueError(f"CPCC needs at least three leaf classes; the labels hold {leaves.size}")
    rows = lab[first]
    if not np.array_equal(rows[inverse], lab):
        bad = int(np.flatnonzero((rows[inverse] != lab).any(axis=1))[0])
        raise ValueError(f"labels row {bad}: leaf {lab[bad, 0]} has other ancestors than in row {first[inverse[bad]]}")
    order = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse)
    sums = np.add.reduceat(x[order].astype(np.float64), np.cumsum(sizes) - sizes, axis=0)
    centroids = (sums / sizes[:, None]).astype(x.dtype)
    # Pearson's r over the n (n - 1) / 2 pairs i < j, in blocks of rows and in two passes (the means,
    # then the centred sums, as np.corrcoef), so that 10^4 leaves need no [n, n] or pair-index arrays.
    distances_to = to_gallery(distance, centroids)
    n = leaves.size
    block = max(1, PAIRS_PER_BLOCK // n)

    def pairs():  # (centroid distances, tree distances) of the pairs i < j, a block of rows i at a time
        for start in range(0, n - 1, block):
            stop = min(start + block, n - 1)
            d = distances_to(centroids[start:stop], None).astype(np.float64)
            t = relation_codes(rows[start:stop], rows).astype(np.float64)
            upper = np.arange(n)[None, :] > np.arange(start, stop)[:, None]
            yield d[upper], t[upper]

    count = n * (n - 1) // 2
    sum_d = sum_t = 0.0
    for d, t in pairs():
        sum_d, sum_t = sum_d + d.sum(), sum_t + t.sum()
    mean_d, mean_t = sum_d / count, sum_t / count
    dd = tt = dt = 0.0
    for d, t in pairs():
        d -= mean_d
        t -= mean_t
        dd, tt, dt = dd + (d * d).sum(), tt + (t * t).sum(), dt + (d * t).sum()
    if dd == 0 or tt == 0:
        return float("nan")
    return float(dt / np.sqrt(dd * tt))
