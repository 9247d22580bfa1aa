"""Hierarchical retrieval metrics as a library: NumPy arrays (or torch tensors) in, numbers out; no home,
store, console or torch. Labels are ``[n, K]`` integer codes of a tree, one column per level, leaf first;
two items' tree distance is the height of their lowest common ancestor (0 the same leaf, h when they first
share level h, K when they share none).

- :func:`evaluate`: strict per-level mAP and R@k, H-AP and ASI (HAPPIER), hierarchical NDCG@k, mistake
  severity@k and CPCC of a query set against a gallery, exact, streamed over query chunks; a
  :class:`Results` of per-query values and their micro or group-macro means.
- :func:`cpcc`: the cophenetic correlation of class centroids with the tree.

Every ranking orders the gallery by increasing distance, equal distances by gallery index (`ranking`).
Every name is loaded on first use: `evaluate`, `cpcc` and the distances import numba (compiled passes) and
the results NumPy, which the study's engine (reading `ranking` and `cores`) and the light commands (reading
`names`, as the preset's checks do) do not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hierconsole.metrics.names import DEFAULT_METRICS, GAINS, METRIC_NAMES

if TYPE_CHECKING:
    from hierconsole.metrics.cophenetic import cpcc
    from hierconsole.metrics.distances import DISTANCES, pairwise_distances, poincare
    from hierconsole.metrics.evaluation import evaluate
    from hierconsole.metrics.results import HIERARCHY, Results

__all__ = [
    "DEFAULT_METRICS",
    "DISTANCES",
    "GAINS",
    "HIERARCHY",
    "METRIC_NAMES",
    "Results",
    "cpcc",
    "evaluate",
    "pairwise_distances",
    "poincare",
]


_LAZY = {
    "evaluate": "hierconsole.metrics.evaluation",
    "cpcc": "hierconsole.metrics.cophenetic",
    "DISTANCES": "hierconsole.metrics.distances",
    "pairwise_distances": "hierconsole.metrics.distances",
    "poincare": "hierconsole.metrics.distances",
    "HIERARCHY": "hierconsole.metrics.results",
    "Results": "hierconsole.metrics.results",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hierconsole.metrics' has no attribute {name!r}")
