"""CPCC, the cophenetic correlation of a representation with the tree: the Pearson correlation, over the
pairs of leaf classes, between the distance of their centroids and their tree distance (the height of
their lowest common ancestor, `taxonomy.relation_codes`), as used in hierarchy-aware representation work.

A class's centroid is the arithmetic mean of its embeddings' coordinates (in the Poincaré ball a mean of
points of the ball stays inside it), compared under the given distance.
"""

from __future__ import annotations

import numpy as np

from hierconsole.metrics.distances import Distance, pairwise_distances
from hierconsole.metrics.ranking import as_embeddings, as_labels
from hierconsole.taxonomy import relation_codes


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
    sums = np.zeros((leaves.size, x.shape[1]))
    np.add.at(sums, inverse, x)
    centroids = sums / np.bincount(inverse)[:, None]
    upper = np.triu_indices(leaves.size, k=1)
    between = pairwise_distances(centroids, centroids, distance)[upper]
    tree = relation_codes(rows, rows)[upper].astype(np.float64)
    if between.std() == 0 or tree.std() == 0:
        return float("nan")
    return float(np.corrcoef(between, tree)[0, 1])
