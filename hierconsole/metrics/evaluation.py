"""`evaluate`: every metric of a query set against a gallery, exact, streamed over query chunks.

Each chunk of queries is ranked against the whole gallery once (`ranking`), and one compiled pass down
each ranking computes every metric (`scan`): no [Q, G] matrix is ever held, so a 10^6-item gallery costs
the chunks' temporaries (the memory budget) beyond the embeddings. Chunks are scored on worker threads
(the distances, the sort and the pass release the GIL). Under the built-in distances a query's numbers
are the same bits whatever its chunk and the number of workers (`distances`); a distance function of
one's own is called per chunk, and its last bits may follow the chunk's shape.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from hierconsole.metrics.cophenetic import cpcc
from hierconsole.metrics.cores import usable_cores
from hierconsole.metrics.distances import Distance, resolve, to_gallery
from hierconsole.metrics.labels import Tree, as_embeddings, as_labels
from hierconsole.metrics.names import ASI, DEFAULT_METRICS, GAINS, HAP, MAP, NDCG, RECALL, SEVERITY, MetricSet
from hierconsole.metrics.ranking import index_bits, ranked_heights
from hierconsole.metrics.relevance import RELEVANCES
from hierconsole.metrics.relevance import relevance as relevance_of
from hierconsole.metrics.results import Results
from hierconsole.metrics.scan import scan
from hierconsole.vocabulary import AGGREGATIONS, MICRO, Aggregation

MEMORY_BUDGET = 512 * 2**20
"""Bytes of [chunk, gallery] temporaries all worker threads together may hold."""
BYTES_PER_PAIR = 32
"""Peak bytes per (query, gallery) pair of a chunk, rounded up: the distance and its temporaries (4-8,
twice), the packed sort value (8) or the argsort's index (8) and its gather (1), the tree distances (1)."""


def evaluate(
    query: Any,
    gallery: Any,
    query_labels: Any,
    gallery_labels: Any,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    geometry: str | Distance = "euclidean",
    aggregate: Aggregation = MICRO,
    level_names: Sequence[Hashable] | None = None,
    gain: str = "exp",
    relevance: str = "pop",
    alpha: float = 1.0,
    workers: int | None = None,
    memory_budget: int = MEMORY_BUDGET,
) -> Results:
    """Every metric in ``metrics`` of the queries against the gallery, ranked by ``geometry``'s distance.

    ``query`` [Q, D] and ``gallery`` [G, D] are NumPy arrays or torch tensors (any device; scored on the
    CPU), float32 ranked in float32, anything else in float64; labels are [n, K] integer codes of a tree,
    leaf first. ``geometry`` is ``euclidean``, ``poincare`` (curvature 1), or a function (x [n, D], y [m, D])
    -> [n, m] distances (e.g. ``distances.poincare(c)``). ``level_names`` name the levels of the result
    (default: their indices, 0 the leaf). ``gain`` is NDCG's; ``relevance`` and ``alpha`` H-AP's
    (`relevance`). ``workers`` threads score chunks of queries (default: the usable cores), all within
    ``memory_budget`` bytes of temporaries.

    ValueError, naming the argument, for anything malformed, before any work.
    """
    wanted = MetricSet.parse(metrics)
    if gain not in GAINS:
        raise ValueError(f"unknown gain {gain!r}: use one of {', '.join(GAINS)}")
    if relevance not in RELEVANCES:
        raise ValueError(f"unknown relevance {relevance!r}: use one of {', '.join(RELEVANCES)}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, not {alpha}")
    if aggregate not in AGGREGATIONS:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATIONS)}, got {aggregate!r}")
    q, g = as_embeddings(query, "query"), as_embeddings(gallery, "gallery")
    if q.shape[1] != g.shape[1] or g.shape[0] == 0:
        raise ValueError(f"query and gallery must be [Q, D] and [G, D] with G > 0; got {q.shape} and {g.shape}")
    if q.dtype != g.dtype:  # one of them float64: both
        q, g = q.astype(np.float64), g.astype(np.float64)
    q_lab = as_labels(query_labels, "query_labels", q.shape[0])
    g_lab = as_labels(gallery_labels, "gallery_labels", g.shape[0])
    tree = Tree(q_lab, g_lab)
    levels = tuple(range(tree.k)) if level_names is None else tuple(level_names)
    if len(levels) != tree.k or len(set(levels)) != tree.k:
        raise ValueError(f"level_names must name the {tree.k} levels once each, leaf first; got {list(levels)}")
    distance = resolve(geometry)
    cpcc_value = cpcc(g, g_lab, distance=distance) if wanted.cpcc else None  # fails before the long part
    workers = max(1, usable_cores() if workers is None else int(workers))

    n_q, n_g = q.shape[0], g.shape[0]
    recall_ks = np.array(wanted.recall_ks, dtype=np.int64)
    head_ks = np.array(wanted.head_ks, dtype=np.int64)
    ap = np.full((n_q, tree.k), np.nan)
    recall = np.full((n_q, tree.k, recall_ks.size), np.nan)
    hap, asi = np.full(n_q, np.nan), np.full(n_q, np.nan)
    ndcg, severity = np.full((n_q, head_ks.size), np.nan), np.full((n_q, head_ks.size), np.nan)
    rows_per_chunk = max(1, memory_budget // (workers * BYTES_PER_PAIR * n_g))
    distances_to = to_gallery(distance, g)
    index = index_bits(n_g)
    scratch = threading.local()  # each worker's buffers, kept from chunk to chunk (`distances`)

    def score(start: int) -> None:
        stop = min(start + rows_per_chunk, n_q)
        if not hasattr(scratch, "dist"):
            scratch.dist = np.empty((rows_per_chunk, n_g), dtype=g.dtype)
            scratch.packed = np.empty((rows_per_chunk, n_g), dtype=np.int64)
            scratch.heights = np.empty((rows_per_chunk, n_g), dtype=np.uint8)
        rows = stop - start
        dist = distances_to(q[start:stop], scratch.dist[:rows])
        heights, counts = tree.chunk(start, stop, out=scratch.heights[:rows])
        ranked = ranked_heights(dist, heights, out=scratch.packed[:rows], index=index)
        rel = relevance_of(counts, relevance, alpha)
        parts = (ap, recall, hap, asi, ndcg, severity)
        scan(ranked, counts, rel, recall_ks, head_ks, gain == "exp", *(a[start:stop] for a in parts))

    starts = range(0, n_q, rows_per_chunk)
    if workers == 1 or len(starts) == 1:
        for start in starts:
            score(start)
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hierconsole-metrics") as pool:
            for _ in pool.map(score, starts):
                pass
    per_level: dict[str, np.ndarray] = {MAP: ap} if wanted.map else {}
    per_level.update({f"{RECALL}@{k}": recall[:, :, i] for i, k in enumerate(wanted.recall_ks)})
    per_query: dict[str, np.ndarray] = {HAP: hap} if wanted.hap else {}
    if wanted.asi:
        per_query[ASI] = asi
    for i, k in enumerate(wanted.head_ks):
        if k in wanted.ndcg_ks:
            per_query[f"{NDCG}@{k}"] = ndcg[:, i]
        if k in wanted.severity_ks:
            per_query[f"{SEVERITY}@{k}"] = severity[:, i]
    return Results(
        levels=levels,
        metrics=wanted.names,
        per_level=per_level,
        per_query=per_query,
        query_labels=q_lab,
        cpcc=cpcc_value,
        aggregate=aggregate,
    )
