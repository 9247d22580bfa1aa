"""Both objectives against brute-force double loops over pairs (paper Eqs. 1-4, 8-11)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hierconsole.engine.geometry import TRAIN_CLIP, Euclidean, Poincare
from hierconsole.engine.losses import regression_loss, relation_codes, taxonomy_supcon_loss
from hierconsole.errors import NoPositivePairsError

# Pair relations of three levels: the lowest level at which two samples meet, 3 where they meet at none.
REL_C, REL_M, REL_H, REL_O = 0, 1, 2, 3

DTYPES = [torch.float32, torch.float64]


def _tree_labels(n: int, seed: int, leaves: int = 6, middles: int = 3, highs: int = 2) -> torch.Tensor:
    # a fixed tree in which every relation c/m/h/o occurs; random samples of its leaves
    rng = np.random.default_rng(seed)
    leaf_middle = np.arange(leaves) % middles
    middle_high = np.arange(middles) % highs
    leaf = rng.integers(0, leaves, n)
    return torch.as_tensor(np.stack([leaf, leaf_middle[leaf], middle_high[leaf_middle[leaf]]], axis=1))


def _dist(n: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    d = torch.rand(n, n, generator=g, dtype=dtype) * 1.5
    d = (d + d.T) / 2
    return d.fill_diagonal_(0.0)


def _relation(li, lj) -> int:
    if li[0] == lj[0]:
        return REL_C
    if li[1] == lj[1]:
        return REL_M
    if li[2] == lj[2]:
        return REL_H
    return REL_O


def _loop_regression(dist, labels, targets) -> float:
    lab = labels.tolist()
    total, count = 0.0, 0
    for i in range(len(lab)):
        for j in range(len(lab)):
            if i == j:
                continue
            diff = abs(dist[i][j] - targets[_relation(lab[i], lab[j])])
            total += 0.5 * diff * diff if diff < 1.0 else diff - 0.5
            count += 1
    return total / count


def _strict_positive(li, lj, level: int) -> bool:
    if level == 0:
        return li[0] == lj[0]
    if level == 1:
        return li[1] == lj[1] and li[0] != lj[0]
    return li[2] == lj[2] and li[1] != lj[1]


def _loop_supcon(dist, labels, tau, weights) -> float:
    lab = labels.tolist()
    b = len(lab)
    num, den = 0.0, 0.0
    for level in range(3):
        if weights[level] <= 0:
            continue
        anchor_losses = []
        for i in range(b):
            pos = [p for p in range(b) if p != i and _strict_positive(lab[i], lab[p], level)]
            if not pos:
                continue
            denom = sum(math.exp(-dist[i][a] / tau) for a in range(b) if a != i)
            anchor_losses.append(sum(-math.log(math.exp(-dist[i][p] / tau) / denom) for p in pos) / len(pos))
        if anchor_losses:
            num += weights[level] * sum(anchor_losses) / len(anchor_losses)
            den += weights[level]
    if den == 0:
        raise AssertionError("no active level")
    return num / den


def test_relation_codes_match_eq_1():
    labels = _tree_labels(20, seed=0)
    rel = relation_codes(labels)
    lab = labels.tolist()
    expected = [[_relation(lab[i], lab[j]) for j in range(20)] for i in range(20)]
    assert rel.tolist() == expected
    assert set(rel.unique().tolist()) == {REL_C, REL_M, REL_H, REL_O}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", DTYPES)
def test_regression_matches_double_loop(seed, dtype):
    labels = _tree_labels(17, seed)
    dist = _dist(17, seed, dtype) * 2  # some |d - target| > 1: both SmoothL1 branches
    targets = (0.2, 0.5, 0.8, 1.0)
    loss = regression_loss(dist, labels)
    assert loss.dtype == dtype and loss.shape == ()
    expected = _loop_regression(dist.double().tolist(), labels, targets)
    assert loss.item() == pytest.approx(expected, rel=1e-6 if dtype == torch.float32 else 1e-12)
    custom = (0.1, 0.3, 0.6, 2.0)
    assert regression_loss(dist, labels, custom).item() == pytest.approx(
        _loop_regression(dist.double().tolist(), labels, custom), rel=1e-6
    )


def test_regression_ignores_the_diagonal():
    labels = _tree_labels(9, seed=4)
    dist = _dist(9, 4)
    shifted = dist.clone().fill_diagonal_(7.0)
    assert regression_loss(shifted, labels).item() == regression_loss(dist, labels).item()


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0), (1.0, 0.0, 2.0), (0.0, 0.5, 1.0)])
def test_supcon_matches_double_loop(seed, dtype, weights):
    labels = _tree_labels(16, seed)
    dist = _dist(16, seed, dtype)
    tau = 0.3
    loss = taxonomy_supcon_loss(dist, labels, tau, weights)
    assert loss.dtype == dtype and loss.shape == ()
    expected = _loop_supcon(dist.double().tolist(), labels, tau, weights)
    assert loss.item() == pytest.approx(expected, rel=1e-5 if dtype == torch.float32 else 1e-12)


def test_supcon_skips_levels_without_anchors_and_renormalises():
    # leaves 0,0 | 1 | 2: middle groups {0,1} share middle 0 (strict middle positives); every high group
    # holds a single middle, so no strict high positive exists anywhere
    labels = torch.tensor([[0, 0, 0], [0, 0, 0], [1, 0, 0], [2, 1, 1], [3, 2, 2]])
    dist = _dist(5, seed=5)
    tau = 0.5
    loss = taxonomy_supcon_loss(dist, labels, tau, (1.0, 1.0, 1.0))
    expected = _loop_supcon(dist.tolist(), labels, tau, (1.0, 1.0, 1.0))
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    # the skipped level does not dilute the others: same as weighting only leaf and middle
    assert loss.item() == pytest.approx(
        taxonomy_supcon_loss(dist, labels, tau, (1.0, 1.0, 0.0)).item(), rel=1e-12
    )
    only_leaf = taxonomy_supcon_loss(dist, labels, tau, (1.0, 0.0, 0.0)).item()
    only_middle = taxonomy_supcon_loss(dist, labels, tau, (0.0, 1.0, 0.0)).item()
    assert loss.item() == pytest.approx((only_leaf + only_middle) / 2, rel=1e-12)
    assert only_leaf != pytest.approx(only_middle)


def test_supcon_raises_when_no_active_level_has_a_positive():
    labels = torch.tensor([[0, 0, 0], [1, 0, 0], [2, 1, 1], [3, 2, 2]])  # distinct leaves; one middle pair
    dist = _dist(4, seed=6)
    with pytest.raises(NoPositivePairsError, match=r"no strict positive pair at any active level.*leaf=0"):
        taxonomy_supcon_loss(dist, labels, 0.1, (1.0, 0.0, 1.0))
    # the middle level has anchors, so with its weight on the loss is defined
    assert torch.isfinite(taxonomy_supcon_loss(dist, labels, 0.1, (1.0, 1.0, 1.0)))
    with pytest.raises(NoPositivePairsError):  # every sample in its own high group
        taxonomy_supcon_loss(_dist(3, 7), torch.tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2]]), 0.1)


def test_supcon_keeps_other_high_groups_in_the_denominator():
    labels = torch.tensor([[0, 0, 0], [0, 0, 0], [5, 5, 5]])
    dist = torch.tensor([[0.0, 0.4, 0.9], [0.4, 0.0, 0.3], [0.9, 0.3, 0.0]], dtype=torch.float64)
    tau = 0.2
    # anchors 0 and 1, each with the other as the only positive; sample 2 is only in the denominators
    a0 = -math.log(math.exp(-0.4 / tau) / (math.exp(-0.4 / tau) + math.exp(-0.9 / tau)))
    a1 = -math.log(math.exp(-0.4 / tau) / (math.exp(-0.4 / tau) + math.exp(-0.3 / tau)))
    assert taxonomy_supcon_loss(dist, labels, tau).item() == pytest.approx((a0 + a1) / 2, rel=1e-12)


def test_supcon_is_stable_in_float32_with_large_logits():
    labels = _tree_labels(32, seed=8)
    dist = _dist(32, 8) * TRAIN_CLIP  # distances up to 30 -> |s| up to 3000 at tau = 0.01
    tau = 0.01
    expected = taxonomy_supcon_loss(dist, labels, tau)  # float64
    got = taxonomy_supcon_loss(dist.float(), labels, tau)
    assert torch.isfinite(got)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("geometry", [Euclidean(), Poincare(c=2.0, r=0.4)], ids=["euclidean", "poincare"])
def test_gradients_are_finite_through_geometry_self_distances(geometry):
    torch.manual_seed(9)
    labels = _tree_labels(24, seed=9)
    t = torch.randn(24, 8)
    t[3] = t[4]  # a duplicate pair: zero distance off the diagonal
    t.requires_grad_(True)
    dist = geometry.pairwise(geometry.embed(t), clip_max=TRAIN_CLIP)
    loss = taxonomy_supcon_loss(dist, labels, 0.1) + regression_loss(dist, labels)
    loss.backward()
    assert torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


def test_leading_cell_axis_with_per_cell_temperature():
    labels = _tree_labels(12, seed=10)
    dists = torch.stack([_dist(12, s) for s in (11, 12, 13)])
    taus = torch.tensor([0.1, 0.2, 0.5], dtype=torch.float64)
    batched_s = taxonomy_supcon_loss(dists, labels, taus)
    batched_r = regression_loss(dists, labels)
    assert batched_s.shape == (3,) and batched_r.shape == (3,)
    for cell in range(3):
        assert batched_s[cell].item() == pytest.approx(
            taxonomy_supcon_loss(dists[cell], labels, taus[cell].item()).item(), rel=1e-12
        )
        assert batched_r[cell].item() == pytest.approx(regression_loss(dists[cell], labels).item(), rel=1e-12)
    shared = taxonomy_supcon_loss(dists, labels, 0.2)
    assert shared[1].item() == pytest.approx(batched_s[1].item(), rel=1e-12)


def test_input_checks():
    labels = _tree_labels(5, seed=11)
    with pytest.raises(ValueError, match="dist must be"):
        regression_loss(_dist(4, 0), labels)
    with pytest.raises(ValueError, match="labels must be"):
        taxonomy_supcon_loss(_dist(5, 0), labels[:, 0], 0.1)
    with pytest.raises(ValueError, match="labels must be"):
        taxonomy_supcon_loss(_dist(5, 0), labels[:, [0] * 13], 0.1)
    with pytest.raises(ValueError, match="weights"):
        taxonomy_supcon_loss(_dist(5, 0), labels, 0.1, (0.0, 0.0, 0.0))


# -- any depth ------------------------------------------------------------------------------------------


def _deep_tree_labels(n: int, k: int, seed: int, leaves: int = 16) -> torch.Tensor:
    """[n, K] samples of a K-level tree whose level l has leaves // 2^l nodes (at least one)."""
    rng = np.random.default_rng(seed)
    leaf = rng.integers(0, leaves, n)
    return torch.as_tensor(np.stack([leaf // 2**lvl for lvl in range(k)], axis=1))


def _deep_relation(li, lj) -> int:
    return next((lvl for lvl in range(len(li)) if li[lvl] == lj[lvl]), len(li))


def _deep_positive(li, lj, level: int) -> bool:
    return li[level] == lj[level] and (level == 0 or li[level - 1] != lj[level - 1])


def _deep_loop_regression(dist, labels, targets) -> float:
    lab = labels.tolist()
    total, count = 0.0, 0
    for i in range(len(lab)):
        for j in range(len(lab)):
            if i != j:
                diff = abs(dist[i][j] - targets[_deep_relation(lab[i], lab[j])])
                total += 0.5 * diff * diff if diff < 1.0 else diff - 0.5
                count += 1
    return total / count


def _deep_loop_supcon(dist, labels, tau, weights) -> float:
    lab = labels.tolist()
    b = len(lab)
    num, den = 0.0, 0.0
    for level in range(len(weights)):
        if weights[level] <= 0:
            continue
        anchor_losses = []
        for i in range(b):
            pos = [p for p in range(b) if p != i and _deep_positive(lab[i], lab[p], level)]
            if pos:
                denom = sum(math.exp(-dist[i][a] / tau) for a in range(b) if a != i)
                anchor_losses.append(sum(-math.log(math.exp(-dist[i][p] / tau) / denom) for p in pos) / len(pos))
        if anchor_losses:
            num += weights[level] * sum(anchor_losses) / len(anchor_losses)
            den += weights[level]
    return num / den


def test_relation_codes_of_seven_levels_are_the_lowest_meeting_level():
    labels = _deep_tree_labels(30, 7, seed=20, leaves=48)
    labels[-1] = 1000  # a sample related to no other: relation K
    rel = relation_codes(labels)
    lab = labels.tolist()
    assert rel.tolist() == [[_deep_relation(a, b) for b in lab] for a in lab]
    assert set(rel.unique().tolist()) == set(range(8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_regression_of_seven_levels_matches_double_loop(dtype):
    from hierconsole.levels import default_regression_targets

    labels = _deep_tree_labels(24, 7, seed=21, leaves=48)
    labels[-1] = 1000
    dist = _dist(24, seed=21, dtype=dtype)
    rel = 1e-5 if dtype == torch.float32 else 1e-12
    for targets in (None, (0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9, 1.3)):
        expected = _deep_loop_regression(dist.tolist(), labels, targets or default_regression_targets(7))
        assert regression_loss(dist, labels, targets).item() == pytest.approx(expected, rel=rel)
    with pytest.raises(ValueError, match="targets must give 8 values"):
        regression_loss(dist, labels, (0.2, 0.5, 0.8, 1.0))


@pytest.mark.parametrize("weights", [None, (1.0, 0.5, 2.0, 0.0, 1.0, 0.25, 3.0)])
def test_supcon_of_seven_levels_matches_double_loop(weights):
    labels = _deep_tree_labels(20, 7, seed=22, leaves=64)
    dist = _dist(20, seed=22)
    loss = taxonomy_supcon_loss(dist, labels, 0.3, weights)
    expected = _deep_loop_supcon(dist.tolist(), labels, 0.3, weights or (1.0,) * 7)
    assert loss.item() == pytest.approx(expected, rel=1e-12)


def test_supcon_of_five_levels_skips_a_level_without_anchors_and_renormalises():
    # levels 2 and 3 are the same partition (each level-2 node alone under its level-3 parent), so no pair
    # meets first at level 3: that level has no anchor
    labels = _deep_tree_labels(18, 5, seed=23, leaves=32)
    labels[:, 2] = labels[:, 1]
    dist = _dist(18, seed=23)
    weights = (1.0, 2.0, 5.0, 0.5, 1.5)
    strict = [[_deep_positive(a, b, 2) for b in labels.tolist()] for a in labels.tolist()]
    assert not any(map(any, strict))
    loss = taxonomy_supcon_loss(dist, labels, 0.4, weights)
    assert loss.item() == pytest.approx(_deep_loop_supcon(dist.tolist(), labels, 0.4, weights), rel=1e-12)
    # exactly the loss with that level's weight at zero: the others are renormalised, not diluted
    without = taxonomy_supcon_loss(dist, labels, 0.4, (1.0, 2.0, 0.0, 0.5, 1.5))
    assert torch.equal(loss, without)
    with pytest.raises(NoPositivePairsError, match=r"anchors per level: level1=\d+, level2=\d+, level3=0, .*weights: level1=0, level2=0, level3=1, level4=0"):
        taxonomy_supcon_loss(dist, labels, 0.4, (0.0, 0.0, 1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="weights must be 5 non-negative numbers"):
        taxonomy_supcon_loss(dist, labels, 0.4, (1.0, 1.0, 1.0))
