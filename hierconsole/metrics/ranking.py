"""Hierarchical NDCG@k and mistake severity@k of a ranking, streamed over query chunks.

Each query ranks the whole gallery by increasing distance, equal distances by gallery index (a stable
sort; NaN last), and every metric reads the tree distance h (`taxonomy.relation_codes`: the height of the
lowest common ancestor, 0 the same leaf, K none shared) of the items it ranks.

- **Hierarchical NDCG@k**: the relevance of an item is the depth of its lowest common ancestor with the
  query, K - h (K: the same leaf; 0: nothing shared), through a gain (`exp`: 2^rel - 1, as HAPPIER's
  NDCG; `linear`: rel). DCG@k = sum over ranks i = 1..k of gain_i / log2(i + 1); the ideal DCG@k ranks the
  whole gallery by relevance. Averaged over the queries whose ideal DCG is not 0.
- **Mistake severity@k** ("Making Better Mistakes", Bertinetto et al., CVPR 2020): over the top-k items
  that are mistakes (another leaf, h > 0), the mean h; averaged over the queries with at least one mistake
  there.

A k larger than the gallery reads the whole gallery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hierconsole.levels import MAX_LEVELS
from hierconsole.metrics.distances import Distance, pairwise_distances
from hierconsole.taxonomy import relation_codes

GAINS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": lambda rel: np.exp2(rel) - 1.0,
    "linear": lambda rel: rel.astype(np.float64),
}
"""NDCG's gain of an item's relevance (the depth of its lowest common ancestor with the query)."""
MEMORY_BUDGET = 256 * 2**20
"""Bytes of [chunk, gallery] temporaries a query chunk may use: distances, order and tree distances."""
_BYTES_PER_PAIR = 32


@dataclass(frozen=True, eq=False)
class RankingMetrics:
    """The metrics at each k, averaged over the queries each is defined for, and per query (NaN where not)."""

    ks: tuple[int, ...]
    ndcg: np.ndarray
    """[Q, len(ks)] per-query hierarchical NDCG@k (NaN: the gallery shares nothing with the query)."""
    mistake_severity: np.ndarray
    """[Q, len(ks)] per-query mistake severity@k (NaN: no mistake in the top k)."""

    def to_dict(self) -> dict[str, float]:
        """`NDCG@k` and `mistake_severity@k` for each k: the means over the queries each is defined for
        (NaN where none is), with `NDCG_queries@k` and `mistake_queries@k`, how many those are."""
        out: dict[str, float] = {}
        metrics = (("NDCG", "NDCG_queries", self.ndcg), ("mistake_severity", "mistake_queries", self.mistake_severity))
        for name, count, values in metrics:
            for i, k in enumerate(self.ks):
                defined = values[~np.isnan(values[:, i]), i]
                out[f"{name}@{k}"] = float(defined.mean()) if defined.size else float("nan")
                out[f"{count}@{k}"] = int(defined.size)
        return out


def as_labels(labels: np.ndarray, what: str, rows: int) -> np.ndarray:
    a = np.asarray(labels)
    if a.ndim != 2 or not 1 <= a.shape[1] <= MAX_LEVELS or a.shape[0] != rows:
        raise ValueError(f"{what} must be [{rows}, K] with one column per level, leaf first; got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{what} must be integer codes; got {a.dtype}")
    return a


def as_embeddings(x: np.ndarray, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{what} must be [n, D]; got shape {a.shape}")
    return a


def ranking_metrics(
    query: np.ndarray,
    gallery: np.ndarray,
    query_labels: np.ndarray,
    gallery_labels: np.ndarray,
    *,
    ks: Sequence[int] = (1, 5, 10),
    gain: str = "exp",
    distance: str | Distance = "euclidean",
    memory_budget: int = MEMORY_BUDGET,
) -> RankingMetrics:
    """Hierarchical NDCG@k and mistake severity@k of every query against the gallery (module docstring)."""
    q, g = as_embeddings(query, "query"), as_embeddings(gallery, "gallery")
    if q.shape[1] != g.shape[1] or g.shape[0] == 0:
        raise ValueError(f"query and gallery must be [Q, D] and [G, D] with G > 0; got {q.shape} and {g.shape}")
    q_lab = as_labels(query_labels, "query_labels", q.shape[0])
    g_lab = as_labels(gallery_labels, "gallery_labels", g.shape[0])
    if q_lab.shape[1] != g_lab.shape[1]:
        raise ValueError(f"query and gallery labels have {q_lab.shape[1]} and {g_lab.shape[1]} levels")
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1 or len(set(ks)) != len(ks):
        raise ValueError(f"ks must be distinct positive integers, got {ks}")
    if gain not in GAINS:
        raise ValueError(f"unknown gain {gain!r}: use one of {', '.join(GAINS)}")
    levels, n_gallery = q_lab.shape[1], g.shape[0]
    depth = min(max(ks), n_gallery)
    discount = 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))
    gain_of = GAINS[gain]
    ndcg = np.full((q.shape[0], len(ks)), np.nan)
    severity = np.full((q.shape[0], len(ks)), np.nan)
    rows = max(1, memory_budget // (_BYTES_PER_PAIR * n_gallery))
    for start in range(0, q.shape[0], rows):
        stop = min(start + rows, q.shape[0])
        d = pairwise_distances(q[start:stop], g, distance)
        order = np.argsort(d, axis=1, kind="stable")[:, :depth]  # NaN sorts last
        heights = relation_codes(q_lab[start:stop], g_lab)
        top = np.take_along_axis(heights, order, axis=1).astype(np.int64)
        ideal = np.sort(heights, axis=1)[:, :depth].astype(np.int64)  # the lowest heights first
        dcg = np.cumsum(gain_of(levels - top) * discount, axis=1)
        best = np.cumsum(gain_of(levels - ideal) * discount, axis=1)
        mistakes = top > 0
        n_mistakes = np.cumsum(mistakes, axis=1)
        mistake_heights = np.cumsum(np.where(mistakes, top, 0), axis=1)
        for i, k in enumerate(ks):
            at = min(k, n_gallery) - 1
            with np.errstate(invalid="ignore", divide="ignore"):
                ndcg[start:stop, i] = np.where(best[:, at] > 0, dcg[:, at] / best[:, at], np.nan)
                severity[start:stop, i] = np.where(
                    n_mistakes[:, at] > 0, mistake_heights[:, at] / n_mistakes[:, at], np.nan
                )
    return RankingMetrics(ks=ks, ndcg=ndcg, mistake_severity=severity)
