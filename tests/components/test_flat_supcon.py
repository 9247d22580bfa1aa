"""Flat SupCon against a plain double loop in float64: leaf positives only, every other sample a negative."""

from __future__ import annotations

import math

import torch

from hierconsole.components.flat_supcon import FlatSupCon
from hierconsole.components.objectives import Regression, TaxonomySupCon
from hierconsole.config import load_preset
from hierconsole.engine.losses import objective_of, regression_loss, taxonomy_supcon_loss

TRAINING = load_preset("demo").training


def _reference(d: list[list[float]], leaf: list[int], tau: float) -> float:
    n = len(leaf)
    per_anchor = []
    for i in range(n):
        positives = [j for j in range(n) if j != i and leaf[j] == leaf[i]]
        if not positives:
            continue
        log_denominator = math.log(sum(math.exp(-d[i][a] / tau) for a in range(n) if a != i))
        per_anchor.append(sum(-(-d[i][p] / tau - log_denominator) for p in positives) / len(positives))
    return sum(per_anchor) / len(per_anchor)


def test_flat_supcon_is_the_leaf_only_contrastive_loss():
    g = torch.Generator().manual_seed(3)
    b = 12
    labels = torch.stack([torch.arange(b) % 4, torch.arange(b) % 2, torch.zeros(b, dtype=torch.long)], dim=1)
    x = torch.randn(2, b, 5, generator=g, dtype=torch.float64)
    dist = torch.cdist(x, x)
    tau = torch.tensor([0.2, 0.5], dtype=torch.float64)
    got = FlatSupCon().loss(dist, labels, tau=tau, training=TRAINING)
    for c in range(2):
        want = _reference(dist[c].tolist(), labels[:, 0].tolist(), float(tau[c]))
        assert abs(float(got[c]) - want) < 1e-12
    # Taxonomy-SupCon with weight on the leaf alone is the same loss: the taxonomy's contribution is the rest.
    same = taxonomy_supcon_loss(dist, labels, tau, weights=(1.0, 0.0, 0.0))
    torch.testing.assert_close(got, same, rtol=0, atol=1e-12)
    full = taxonomy_supcon_loss(dist, labels, tau, weights=(1.0, 1.0, 1.0))
    assert not torch.allclose(got, full)


def test_the_papers_objectives_as_components_are_the_engines_losses():
    g = torch.Generator().manual_seed(4)
    labels = torch.stack([torch.arange(10) % 5, torch.arange(10) % 2, torch.zeros(10, dtype=torch.long)], dim=1)
    x = torch.randn(3, 10, 4, generator=g, dtype=torch.float64)
    dist = torch.cdist(x, x)
    tau = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    assert torch.equal(Regression().loss(dist, labels, tau=None, training=TRAINING), regression_loss(dist, labels, TRAINING.regression_targets))
    assert torch.equal(TaxonomySupCon().loss(dist, labels, tau=tau, training=TRAINING), taxonomy_supcon_loss(dist, labels, tau, TRAINING.level_weights))
    assert isinstance(objective_of("flat_supcon"), FlatSupCon)
    assert (Regression.uses_tau, TaxonomySupCon.uses_tau, FlatSupCon.uses_tau) == (False, True, True)
