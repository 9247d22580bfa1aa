"""Soft-label cross-entropy ("Making Better Mistakes") against a plain loop in float64: soft targets from
the lowest common ancestor's height, logits from the distances to the leaf prototypes."""

from __future__ import annotations

import math

import pytest
import torch

from hierconsole.components.soft_ce import SoftCE, soft_targets
from hierconsole.config import load_preset
from hierconsole.engine.losses import objective_of
from hierconsole.engine.prototypes import initial_prototypes, owns_prototypes
from hierconsole.registry import OBJECTIVES

TRAINING = load_preset("demo").training

# Six leaves in three middles in two highs: leaf j's middle is j // 2, its high (j // 2) // 2.
LEAVES = torch.tensor([[j, j // 2, j // 4] for j in range(6)])


def _lca_height(a: list[int], b: list[int]) -> float:
    """The trained levels climbed before a and b agree, over the number of levels (1: they never do)."""
    for level, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y:
            return level / len(a)
    return 1.0


def _reference(dist: list[list[float]], labels: list[list[int]], leaves: list[list[int]], tau: float, beta: float) -> float:
    total = 0.0
    for i, row in enumerate(labels):
        weights = [math.exp(-beta * _lca_height(row, leaf)) for leaf in leaves]
        targets = [w / sum(weights) for w in weights]
        logits = [-d / tau for d in dist[i]]
        log_z = math.log(sum(math.exp(v) for v in logits))
        total += -sum(t * (v - log_z) for t, v in zip(targets, logits, strict=True))
    return total / len(labels)


def test_soft_label_cross_entropy_is_the_papers_loss():
    g = torch.Generator().manual_seed(5)
    leaf = torch.tensor([0, 1, 1, 2, 3, 4, 5, 5])
    labels = LEAVES[leaf]
    prototype_dist = torch.rand(2, len(leaf), 6, generator=g, dtype=torch.float64) * 2
    tau = torch.tensor([0.1, 0.4], dtype=torch.float64)
    got = SoftCE().loss(
        torch.zeros(2, len(leaf), len(leaf), dtype=torch.float64),
        labels,
        tau=tau,
        training=TRAINING,
        prototype_dist=prototype_dist,
        leaf_labels=LEAVES,
    )
    for c in range(2):
        want = _reference(prototype_dist[c].tolist(), labels.tolist(), LEAVES.tolist(), float(tau[c]), SoftCE.beta)
        assert abs(float(got[c]) - want) < 1e-12
    # One cell alone ([B, N] distances, a 0-dim temperature) gives that cell's loss as a scalar.
    one = SoftCE().loss(None, labels, tau=tau[1], training=TRAINING, prototype_dist=prototype_dist[1], leaf_labels=LEAVES)
    assert one.dim() == 0 and abs(float(one) - float(got[1])) < 1e-12
    with pytest.raises(ValueError, match="needs a temperature"):
        SoftCE().loss(None, labels, tau=None, training=TRAINING, prototype_dist=prototype_dist, leaf_labels=LEAVES)


def test_soft_targets_spread_by_tree_distance_and_sharpen_to_one_hot():
    labels = LEAVES[torch.tensor([0, 3])]
    q = soft_targets(labels, LEAVES, beta=10.0)
    torch.testing.assert_close(q.sum(dim=1), torch.ones(2, dtype=torch.float64), rtol=0, atol=1e-15)
    # Leaf 0: itself, then its sibling 1, then its cousins 2 and 3, then the other high's 4 and 5.
    row = q[0].tolist()
    assert row[0] > row[1] > row[2] == row[3] > row[4] == row[5] > 0
    assert row[1] / row[0] == pytest.approx(math.exp(-10.0 / 3))
    torch.testing.assert_close(soft_targets(labels, LEAVES, beta=1e4), torch.eye(6, dtype=torch.float64)[[0, 3]])
    assert torch.allclose(soft_targets(labels, LEAVES, beta=0.0), torch.full((2, 6), 1 / 6, dtype=torch.float64))


def test_soft_ce_is_a_built_in_objective_with_its_own_prototypes():
    soft = OBJECTIVES["soft_ce"]
    assert (soft.code, soft.takes_tau) == ("C", True)
    assert isinstance(objective_of("soft_ce"), SoftCE) and owns_prototypes(SoftCE)
    assert not any(owns_prototypes(objective_of(n)) for n in ("regression", "supcon", "flat_supcon"))
    first, again, other = initial_prototypes(42, 6, 8), initial_prototypes(42, 6, 8), initial_prototypes(43, 6, 8)
    assert first.dtype == torch.float64 and torch.equal(first, again) and not torch.equal(first, other)
    assert first.norm(dim=1).mean() == pytest.approx(1.0, abs=0.3)
