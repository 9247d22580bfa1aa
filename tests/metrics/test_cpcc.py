"""CPCC against scipy's cophenetic correlation on the same tree: the taxonomy written as a linkage whose
merge heights are the levels, and the centroids' distances as the observations."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.cluster.hierarchy import cophenet
from scipy.spatial.distance import pdist

from hierconsole.metrics import cpcc


def _linkage(rows: np.ndarray) -> np.ndarray:
    """A scipy linkage of the leaves ``rows`` [n, K] (leaf first) whose cophenetic distance of two leaves
    is the level at which they first share a group (K: at the root): clusters merge level by level."""
    n, k = rows.shape
    clusters = {i: [i] for i in range(n)}  # scipy's cluster id -> its leaves
    z, next_id = [], n
    for height in range(1, k + 1):
        groups: dict[int, list[int]] = {}
        for cid, leaves in clusters.items():
            group = int(rows[leaves[0], height]) if height < k else 0  # the root holds everything
            groups.setdefault(group, []).append(cid)
        merged = {}
        for ids in groups.values():
            cid = ids[0]
            for other in ids[1:]:
                size = len(clusters[cid]) + len(clusters[other])
                z.append([cid, other, float(height), size])
                clusters[next_id] = clusters[cid] + clusters[other]
                cid, next_id = next_id, next_id + 1
            merged[cid] = clusters[cid]
        clusters = merged
    return np.array(z, dtype=np.float64)


def test_cpcc_is_scipys_cophenetic_correlation_of_the_tree():
    rng = np.random.default_rng(7)
    leaves = np.repeat(np.arange(12), 4)
    labels = np.stack([leaves, leaves // 3, leaves // 6], axis=1)
    x = rng.normal(size=(leaves.size, 5)) + labels[:, 1:2] * 0.5
    got = cpcc(x, labels)
    centroids = np.stack([x[leaves == j].mean(0) for j in range(12)])
    rows = np.stack([np.arange(12), np.arange(12) // 3, np.arange(12) // 6], axis=1)
    want, _ = cophenet(_linkage(rows), pdist(centroids))
    assert got == pytest.approx(want, abs=1e-12)
    # Shuffled rows, the same classes: the same number.
    perm = rng.permutation(leaves.size)
    assert cpcc(x[perm], labels[perm]) == pytest.approx(got, abs=1e-12)


def test_a_representation_that_is_the_tree_scores_one_and_undefined_cases_say_so():
    leaves = np.arange(9)
    labels = np.stack([leaves, leaves // 3], axis=1)
    # Centroids whose distances are exactly the tree distances (1 within a parent, 2 across) up to scale.
    x = np.concatenate([np.eye(9) * 0.5, np.repeat(np.eye(3), 3, axis=0) * np.sqrt(0.5) * 1.0], axis=1)
    assert cpcc(x, labels) == pytest.approx(1.0, abs=1e-12)
    flat = np.stack([leaves, np.zeros(9, dtype=int)], axis=1)  # every pair at one tree distance
    assert np.isnan(cpcc(x, flat))
    with pytest.raises(ValueError, match="at least three leaf classes"):
        cpcc(x[:2], labels[:2])
    broken = labels.copy()
    broken = np.concatenate([broken, [[0, 2]]])
    with pytest.raises(ValueError, match="leaf 0 has other ancestors"):
        cpcc(np.concatenate([x, x[:1]]), broken)


@pytest.mark.slow  # a fresh interpreter
def test_the_library_imports_no_torch():
    code = (
        "import sys, numpy as np; from hierconsole.metrics import METRIC_NAMES, evaluate; "
        "x = np.eye(4); lab = np.stack([np.arange(4), np.arange(4) // 2], 1); "
        "evaluate(x, x, lab, lab, metrics=('mAP', 'R@1', 'H-AP', 'ASI', 'NDCG@2', 'mistake_severity@1', 'CPCC')); "
        "bad = [m for m in ('torch', 'textual', 'duckdb', 'polars') if m in sys.modules]; print(bad)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
