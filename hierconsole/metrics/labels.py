"""The library's inputs checked once: embeddings as float arrays, labels as a tree of integer codes, and the
tree distance of every (query, gallery) pair read through the table of leaves.

Labels are ``[n, K]`` integer codes, one column per level, leaf first. They must form a tree: a code of a
level has one parent code at the level above, across the query and the gallery together. The tree distance
of two items is the height of their lowest common ancestor (`taxonomy.relation_codes`): 0 the same leaf, h
when they first share level h (0-based), K when they share none.

Torch tensors are taken as they are on the CPU (through ``__array__``) and moved there from any other
device, so that this package never imports torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierconsole.levels import MAX_LEVELS
from hierconsole.taxonomy import relation_codes


def as_array(x: Any) -> np.ndarray:
    """A NumPy view of an array, or of a torch tensor on any device (copied to the CPU where it is not)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def as_embeddings(x: Any, what: str) -> np.ndarray:
    """[n, D] embeddings as float32 (kept) or float64 (anything else): the precision distances are ranked in."""
    a = as_array(x)
    if a.ndim != 2:
        raise ValueError(f"{what} must be [n, D]; got shape {a.shape}")
    if a.dtype != np.float32:
        a = a.astype(np.float64)
    if not np.isfinite(a).all():
        bad = int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0])
        raise ValueError(f"{what} row {bad} holds a NaN or an infinity")
    return a


def as_labels(labels: Any, what: str, rows: int) -> np.ndarray:
    """[rows, K] integer label codes, 1 <= K <= MAX_LEVELS."""
    a = as_array(labels)
    if a.ndim != 2 or not 1 <= a.shape[1] <= MAX_LEVELS or a.shape[0] != rows:
        raise ValueError(
            f"{what} must be [{rows}, K] with one column per level, leaf first; got shape {a.shape}"
        )
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{what} must be integer codes; got {a.dtype}")
    return a.astype(np.int64, copy=False)


class Tree:
    """The leaves of the query and gallery labels, and the tree distance of query rows to the gallery.

    Each pair's distance is read from its two leaves' rows (a [chunk, leaves] table per query chunk, then
    a gather by the gallery's leaf), so a chunk costs one pass over the gallery whatever the depth.
    """

    def __init__(self, query_labels: np.ndarray, gallery_labels: np.ndarray) -> None:
        if query_labels.shape[1] != gallery_labels.shape[1]:
            raise ValueError(
                f"query and gallery labels have {query_labels.shape[1]} and {gallery_labels.shape[1]} levels"
            )
        both = np.concatenate([query_labels, gallery_labels])
        self.k = both.shape[1]
        leaves, first, inverse = np.unique(both[:, 0], return_index=True, return_inverse=True)
        self.leaf_rows = both[first]
        """[leaves, K]: each leaf's codes, leaves in increasing code order."""
        # A tree: each leaf's rows name the same ancestors, and each code above has one parent (checked on
        # the table of leaves, which is small).
        differs = (self.leaf_rows[inverse] != both).any(axis=1)
        if differs.any():
            bad = int(np.flatnonzero(differs)[0])
            _not_a_tree(
                both,
                len(query_labels),
                int(first[inverse[bad]]),
                bad,
                int(np.flatnonzero(both[bad] != both[first[inverse[bad]]])[0]) - 1,
            )
        for level in range(1, self.k - 1):
            pairs = np.unique(self.leaf_rows[:, level : level + 2], axis=0)
            codes, counts = np.unique(pairs[:, 0], return_counts=True)
            if (counts > 1).any():
                code = codes[counts > 1][0]
                at = np.flatnonzero(self.leaf_rows[:, level] == code)
                other = at[
                    np.flatnonzero(self.leaf_rows[at, level + 1] != self.leaf_rows[at[0], level + 1])[0]
                ]
                _not_a_tree(both, len(query_labels), int(first[at[0]]), int(first[other]), level)
        self.query_leaf = inverse[: len(query_labels)]
        self.gallery_leaf = inverse[len(query_labels) :]
        self.n_leaves = leaves.size
        self._per_leaf = np.bincount(self.gallery_leaf, minlength=self.n_leaves)
        """The gallery items of each leaf."""

    def chunk(self, start: int, stop: int, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """For queries start..stop: uint8 [rows, G] their tree distance to every gallery item (in ``out``
        when given), and int64 [rows, K + 1] how many gallery items lie at each tree distance; both read
        from one [rows, leaves] table of the queries' leaves against every leaf."""
        table = relation_codes(self.leaf_rows[self.query_leaf[start:stop]], self.leaf_rows).astype(np.uint8)
        heights = np.take(table, self.gallery_leaf, axis=1, out=out)
        cells = table.astype(np.int64) + (self.k + 1) * np.arange(stop - start)[:, None]
        weights = np.broadcast_to(self._per_leaf, table.shape).ravel()
        counts = np.bincount(cells.ravel(), weights=weights, minlength=(stop - start) * (self.k + 1))
        return heights, counts.astype(np.int64).reshape(stop - start, self.k + 1)


def _not_a_tree(labels: np.ndarray, n_query: int, row: int, other: int, level: int) -> None:
    """Raise for two rows that give the level-``level`` code of theirs different parents."""
    where = [f"query row {r}" if r < n_query else f"gallery row {r - n_query}" for r in (row, other)]
    raise ValueError(
        f"labels are not a tree: level {level} code {labels[row, level]} has parent {labels[row, level + 1]} "
        f"in {where[0]} and {labels[other, level + 1]} in {where[1]}; give each level's codes one parent"
    )
