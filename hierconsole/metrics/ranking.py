"""Each query's ranking of the gallery, read as the tree distances of the items it ranks.

One rule orders every ranking, here and in the study's engine: increasing distance, equal distances by
gallery index (a stable sort), NaN last (tied with +inf), -0.0 tied with +0.0.

Float32 distances rank through one sort of packed int64 values: the distance's sortable bits (32), the
gallery index (28) and the tree distance (4). The values are distinct and order like (distance, index), so
NumPy's vectorised sort gives the stable order, and the ranked tree distances are the low bits, with no
gather. Float64 distances, and galleries of 2^28 items or more, take a stable argsort and a
gather: the reference path the packed one is tested against.
"""

from __future__ import annotations

import numpy as np

PACK_MAX_GALLERY = 2**28
"""The largest gallery whose index fits the packed value beside a 32-bit key and a 4-bit tree distance."""


def sortable_keys(dist: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """int32 keys of float32 distances that sort like the distances under the ranking rule.

    IEEE-754 bit patterns of non-negative floats sort as integers; NaN becomes +inf, -0.0 becomes +0.0,
    and negative floats (and -inf) have their magnitude bits flipped so that they sort below. ``in_place``
    turns ``dist`` itself into the keys (a view of its memory) instead of a copy.
    """
    if in_place:
        dist += np.float32(0.0)  # -0.0 becomes +0.0
        sortable = dist
    else:
        sortable = dist + np.float32(0.0)  # a copy, and -0.0 becomes +0.0
    nan = np.isnan(sortable)
    if nan.any():
        sortable[nan] = np.inf
    keys = sortable.view(np.int32)
    if (keys < 0).any():  # negative floats (and -inf): flip their magnitude bits
        keys ^= (keys >> 31) & 0x7FFFFFFF
    return keys


def index_bits(n_gallery: int) -> np.ndarray:
    """The gallery index's part of a packed value, shared by every chunk of one evaluation."""
    return np.arange(n_gallery, dtype=np.int64) << 4


def ranked_heights(
    dist: np.ndarray, heights: np.ndarray, out: np.ndarray | None = None, index: np.ndarray | None = None
) -> np.ndarray:
    """Integers [q, G] whose low 4 bits are ``heights`` [q, G] (uint8 tree distances, < 16) in each row's
    ranking by ``dist`` [q, G]: the sorted packed values (in ``out``, int64 [q, G], when given; ``dist``
    is then overwritten by its keys), or the gathered heights. ``index``: :func:`index_bits` of G."""
    n_gallery = dist.shape[1]
    if dist.dtype == np.float32 and n_gallery <= PACK_MAX_GALLERY:
        keys = sortable_keys(dist, in_place=out is not None)
        packed = keys.astype(np.int64) if out is None else out
        if out is not None:
            packed[...] = keys
        packed <<= 32
        packed |= index_bits(n_gallery) if index is None else index
        packed |= heights
        packed.sort(axis=1)
        return packed
    return np.take_along_axis(heights, rank_order(dist), axis=1)


def rank_order(dist: np.ndarray) -> np.ndarray:
    """int64 [q, G]: each row's gallery indices in ranking order (the reference path)."""
    sortable = dist.astype(np.float64) + 0.0  # -0.0 becomes +0.0
    sortable[np.isnan(sortable)] = np.inf
    return np.argsort(sortable, axis=1, kind="stable")
