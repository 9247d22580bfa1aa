"""Hierarchical retrieval metrics as a library: NumPy arrays in, numbers out; no home, store, console or
torch. Labels are ``[n, K]`` integer codes, one column per taxonomy level, leaf first (a row's codes are
its leaf and its ancestors); two items' tree distance is the height of their lowest common ancestor,
``taxonomy.relation_codes``: 0 for the same leaf, k when they first share level k (0-based), K when they
share none.

- :func:`ranking_metrics`: hierarchical NDCG@k and mistake severity@k of a query set against a gallery,
  ranked by increasing distance, equal distances by gallery index (the rule of every hierconsole ranking).
- :func:`cpcc`: the cophenetic correlation of class centroids with the tree.

The study's strict per-level mAP and Recall@K are `hierconsole.engine.retrieval` (torch).
"""

from hierconsole.metrics.cpcc import cpcc
from hierconsole.metrics.distances import DISTANCES, pairwise_distances
from hierconsole.metrics.ranking import GAINS, RankingMetrics, ranking_metrics

__all__ = ["DISTANCES", "GAINS", "RankingMetrics", "cpcc", "pairwise_distances", "ranking_metrics"]
