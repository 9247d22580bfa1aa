"""Every ranking metric of a query, read in one pass down its ranking (compiled with numba).

The ranking is given as the tree distance h of each ranked item (`ranking`); an item's depth with the
query is K - h, the number of levels they share. Per query:

- **Strict AP and Recall@k at each level l** (the study's S2 Eq. 4, for any depth): the level's positives
  are the items with h = l (they share the level-l group and, above the leaf, not the level-(l-1) one).
  AP is the mean over them, in rank order, of i / rank_i (i: positives so far); Recall@k is 1 when one is
  among the first k. A level without positives in the gallery leaves the query out there (NaN).
- **H-AP** (Ramzi et al., "Hierarchical Average Precision Training for Pertinent Image Retrieval", ECCV
  2022; as the authors' evaluation code computes it, github.com/elias-ramzi/HAPPIER,
  happier/engine/metrics.py): (1 / sum_k rel(k)) sum over relevant k of H-rank(k) / rank(k), H-rank(k) =
  sum over the relevant j ranked at or before k of min(rel(k), rel(j)); relevances from `relevance`.
- **ASI** (their average set intersection, at R): with R the items sharing at least one level, the mean
  over n = 1..R of SI(n) / n, SI(n) = sum over depths of min(#{first n retrieved at that depth},
  #{first n of the ideal ranking at that depth}); the ideal ranks by depth, deepest first.
- **Hierarchical NDCG@k** (Järvelin & Kekäläinen's NDCG, graded): relevance the depth K - h through a gain
  (``exp``: 2^depth - 1, as HAPPIER's NDCG; ``linear``: depth); DCG@k = sum over ranks i <= k of
  gain_i / log2(i + 1), over the ideal DCG@k of the whole gallery ranked by depth. With k the gallery's
  size it is HAPPIER's NDCG. Its gains are `names.GAINS`.
- **Mistake severity@k** ("Making Better Mistakes", Bertinetto et al., CVPR 2020): over the first k items
  that are mistakes (h > 0), the mean h.

A query with nothing relevant has no H-AP, ASI or NDCG, one with no mistake in its first k no severity
(NaN). A k beyond the gallery reads the whole gallery. The pass stops once every related item, the first
R ranks and the first max(k) ranks are read; each step costs O(K) at most, so a 10^6-item ranking takes
a few milliseconds, as much as a pass of NumPy does for a single level.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def scan(  # noqa: PLR0913, PLR0912, PLR0915 - one pass computes every metric
    ranked: np.ndarray,
    counts: np.ndarray,
    rel: np.ndarray,
    recall_ks: np.ndarray,
    head_ks: np.ndarray,
    exp_gain: bool,
    ap: np.ndarray,
    recall: np.ndarray,
    hap: np.ndarray,
    asi: np.ndarray,
    ndcg: np.ndarray,
    severity: np.ndarray,
) -> None:
    """Fill each query's metrics (module docstring) from ``ranked`` [q, G]: tree distances in rank order
    (the low 4 bits of any integer type). ``counts`` [q, K + 1]; ``rel`` [q, K]; outputs: ``ap`` [q, K],
    ``recall`` [q, K, len(recall_ks)], ``hap``, ``asi`` [q], ``ndcg``, ``severity`` [q, len(head_ks)]."""
    n_rows, n_gallery = ranked.shape
    levels = counts.shape[1] - 1
    depth = 0
    for k in head_ks:
        depth = max(depth, min(k, n_gallery))
    seen = np.zeros(levels, np.int64)
    ideal_seen = np.zeros(levels, np.int64)
    ap_sum = np.zeros(levels)
    first = np.zeros(levels, np.int64)
    hrank = np.zeros(levels)
    for row in range(n_rows):
        seen[:] = 0
        ideal_seen[:] = 0
        ap_sum[:] = 0.0
        first[:] = 0
        hrank[:] = 0.0
        related = 0
        for lvl in range(levels):
            related += counts[row, lvl]
        stop = max(related, depth)
        hap_num = 0.0
        asi_num = 0.0
        si = 0
        ideal_level = 0
        ideal_left = counts[row, 0]
        dcg = 0.0
        mistakes = 0
        mistake_sum = 0
        head_at = 0
        found = 0
        n = 0
        while n < n_gallery and (found < related or n < stop):
            h = ranked[row, n] & 0xF
            n += 1
            if h < levels:
                found += 1
                before = min(seen[h], ideal_seen[h])
                seen[h] += 1
                si += min(seen[h], ideal_seen[h]) - before
                ap_sum[h] += seen[h] / n
                if seen[h] == 1:
                    first[h] = n
                # H-rank of every level after this item: min(rel(level), rel(h)) more for each
                for lvl in range(levels):
                    hrank[lvl] += min(rel[row, lvl], rel[row, h])
                hap_num += hrank[h] / n
            if n <= related:
                while ideal_left == 0:
                    ideal_level += 1
                    ideal_left = counts[row, ideal_level]
                ideal_left -= 1
                before = min(seen[ideal_level], ideal_seen[ideal_level])
                ideal_seen[ideal_level] += 1
                si += min(seen[ideal_level], ideal_seen[ideal_level]) - before
                asi_num += si / n
            if n <= depth:
                shared = levels - h if h < levels else 0
                gain = 2.0**shared - 1.0 if exp_gain else float(shared)
                dcg += gain / np.log2(n + 1.0)
                if h > 0:
                    mistakes += 1
                    mistake_sum += min(h, levels)
                while head_at < head_ks.size and min(head_ks[head_at], n_gallery) == n:
                    severity[row, head_at] = mistake_sum / mistakes if mistakes > 0 else np.nan
                    ndcg[row, head_at] = dcg
                    head_at += 1
        for lvl in range(levels):
            valid = counts[row, lvl] > 0
            ap[row, lvl] = ap_sum[lvl] / counts[row, lvl] if valid else np.nan
            for i in range(recall_ks.size):
                recall[row, lvl, i] = (1.0 if first[lvl] <= recall_ks[i] else 0.0) if valid else np.nan
        total_rel = 0.0
        for lvl in range(levels):
            total_rel += rel[row, lvl] * counts[row, lvl]
        hap[row] = hap_num / total_rel if total_rel > 0 else np.nan
        asi[row] = asi_num / related if related > 0 else np.nan
        # The ideal DCG@k: the gallery ranked by depth, deepest first.
        ideal_dcg = 0.0
        ideal_level = 0
        ideal_left = counts[row, 0]
        head_at = 0
        for i in range(1, depth + 1):
            while ideal_left == 0 and ideal_level < levels:
                ideal_level += 1
                ideal_left = counts[row, ideal_level]
            ideal_left -= 1
            shared = levels - ideal_level
            ideal_dcg += (2.0**shared - 1.0 if exp_gain else float(shared)) / np.log2(i + 1.0)
            while head_at < head_ks.size and min(head_ks[head_at], n_gallery) == i:
                ndcg[row, head_at] = ndcg[row, head_at] / ideal_dcg if ideal_dcg > 0 else np.nan
                head_at += 1
