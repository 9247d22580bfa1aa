"""The two taxonomy-aware objectives (paper Sec. 3.3, Eqs. 8-11, and S4).

Both take a distance matrix, so they are geometry-agnostic: ``dist`` is [B, B] (or [C, B, B] for C cells
sharing one batch, giving a [C] loss) and ``labels`` is [B, K] integer, one column per trained level, leaf
first (for three levels: leaf, middle, high). Positives are the strict sets used by evaluation
(``retrieval.strict_masks``), with self-pairs removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from hierconsole.engine.retrieval import strict_masks
from hierconsole.errors import NoPositivePairsError
from hierconsole.levels import MAX_LEVELS, Levels, default_regression_targets
from hierconsole.registry import component, load


def _check(dist: Tensor, labels: Tensor) -> int:
    # One trained level (the leaf alone) is a valid, if degenerate, choice of a preset.
    if labels.dim() != 2 or not 1 <= labels.shape[1] <= MAX_LEVELS:
        raise ValueError(
            f"labels must be [B, K] with one column per level, leaf first, K <= {MAX_LEVELS}; "
            f"got shape {tuple(labels.shape)}"
        )
    b = labels.shape[0]
    if dist.dim() < 2 or dist.shape[-2:] != (b, b):
        raise ValueError(f"dist must be [..., {b}, {b}] for {b} labels; got shape {tuple(dist.shape)}")
    if b < 2:
        raise ValueError("a batch needs at least two samples to have a non-self pair")
    return b


def relation_codes(labels: Tensor, others: Tensor | None = None) -> Tensor:
    """[B, M] int64 pair relations of Eq. (1) between the rows of ``labels`` [B, K] and of ``others``
    [M, K] (default: ``labels``): the lowest level at which two meet (0 = same leaf), K where they meet at
    none (for three levels REL_C..REL_O, c/m/h/o)."""
    a = labels.unsqueeze(1)
    b = (labels if others is None else others).unsqueeze(0)
    k = labels.shape[-1]
    rel = torch.full(a.shape[:1] + b.shape[1:2], k, dtype=torch.int64, device=labels.device)
    for lvl in reversed(range(k)):  # coarse to fine: the finest level that agrees is written last
        rel = rel.masked_fill(a[..., lvl] == b[..., lvl], lvl)
    return rel


def regression_loss(dist: Tensor, labels: Tensor, targets: Sequence[float] | None = None) -> Tensor:
    """Eq. (8): SmoothL1 (beta 1) between d(i, j) and the target of the pair's relation, mean over i != j.

    ``targets`` gives K+1 distances, one per relation (same leaf ... same top, other); default
    ``levels.default_regression_targets(K)``, for three levels the paper's (0.2, 0.5, 0.8, 1.0).
    """
    b = _check(dist, labels)
    k = labels.shape[1]
    if targets is None:
        targets = default_regression_targets(k)
    if len(targets) != k + 1:
        raise ValueError(
            f"targets must give {k + 1} values, one per relation (same leaf ... same top, other) of {k} levels; "
            f"got {tuple(targets)}"
        )
    table = torch.tensor(tuple(targets), dtype=dist.dtype, device=dist.device)
    target = table[relation_codes(labels)]
    per_pair = F.smooth_l1_loss(dist, target.expand_as(dist), reduction="none", beta=1.0)
    off_diagonal = ~torch.eye(b, dtype=torch.bool, device=dist.device)
    return per_pair[..., off_diagonal].mean(dim=-1)


def taxonomy_supcon_loss(
    dist: Tensor,
    labels: Tensor,
    tau: float | Tensor,
    weights: Sequence[float] | None = None,
) -> Tensor:
    """Eqs. (9)-(11): Taxonomy-SupCon with logits s = -d / tau and strict positives per level.

    For each level with weight > 0: anchors with at least one strict positive; per anchor, the mean over
    its positives p of -log(e^{s_ip} / sum_{a != i} e^{s_ia}); the mean over anchors. Levels without an
    anchor are skipped and the remaining weights renormalised. Every non-self sample stays in the
    denominator. ``tau`` may be a tensor of shape [C] for a [C, B, B] ``dist`` (one temperature per cell).
    ``weights`` gives one weight per label column, leaf first (default: equal).

    Raises NoPositivePairsError when no level with weight > 0 has an anchor.
    """
    b = _check(dist, labels)
    k = labels.shape[1]
    if weights is None:
        weights = (1.0,) * k
    if len(weights) != k or any(w < 0 for w in weights) or not any(w > 0 for w in weights):
        raise ValueError(
            f"weights must be {k} non-negative numbers (one per level), not all zero; got {tuple(weights)}"
        )
    tau_t = torch.as_tensor(tau, dtype=dist.dtype, device=dist.device)
    if tau_t.dim() > 0:
        tau_t = tau_t.reshape(*tau_t.shape, 1, 1)
    eye = torch.eye(b, dtype=torch.bool, device=dist.device)
    # Self is excluded from the denominator by -inf (exp gives exactly 0), never by subtracting e^{s_ii}.
    logits = (-dist / tau_t).masked_fill(eye, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=-1, keepdim=True)

    positives = strict_masks(labels, labels)
    positives[0] &= ~eye
    n_pos = positives.sum(dim=-1)  # [K, B]
    n_anchors = (n_pos > 0).sum(dim=-1).tolist()  # one host sync for the level-skipping decision
    active = [lvl for lvl in range(k) if weights[lvl] > 0 and n_anchors[lvl] > 0]
    if not active:
        raise NoPositivePairsError(
            f"no strict positive pair at any active level in a minibatch of {b} samples "
            f"(anchors per level: {_per_level(n_anchors)}; weights: {_per_level(weights)}); "
            "every sample differs from all others at each weighted level. Use larger batches, or give "
            "weight to a level whose groups repeat within a batch."
        )
    total: Tensor | float = 0.0
    for lvl in active:  # ascending, and the weights' plain sum below: a float order that never moves
        # where(), not multiplication: log_prob is -inf on the diagonal and 0 * -inf would be NaN.
        pos_sum = torch.where(positives[lvl], log_prob, 0.0).sum(dim=-1)  # [..., B]
        per_anchor = -pos_sum / n_pos[lvl].clamp_min(1)  # zero for non-anchors
        total = total + weights[lvl] * per_anchor.sum(dim=-1) / n_anchors[lvl]
    assert isinstance(total, Tensor)  # `active` is not empty, so the loop ran at least once
    return total / sum(weights[lvl] for lvl in active)


def leaf_only_weights(k: int) -> tuple[float, ...]:
    """Taxonomy-SupCon's level weights that make it flat SupCon: the leaf's alone (every other level's
    weight 0, so it is skipped), with the same logits, temperature and denominator."""
    return (1.0,) + (0.0,) * (k - 1)


def _per_level(values: Sequence[float]) -> str:
    # The loss sees label columns, not the study's names: the default codes of that depth (three levels:
    # leaf, middle, high; one level: the leaf).
    codes = Levels.default(len(values)).codes if len(values) >= 2 else ("leaf",)
    return ", ".join(f"{level}={v:g}" for level, v in zip(codes, values, strict=True))


def objective_of(name: str) -> Any:
    """A cell's objective as a component (a built-in by name, or `module:Name`), ready to give losses:
    ``loss(dist, labels, *, tau, training)`` (`components.registry`)."""
    return load(component("objective", name))()
