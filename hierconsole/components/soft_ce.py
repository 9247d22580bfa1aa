"""Soft-label cross-entropy over learnt leaf prototypes ("Making Better Mistakes", Bertinetto et al.,
CVPR 2020): each sample is classified among the N leaves by its distance to each leaf's prototype, and its
target is not one-hot but spread over the leaves by their tree distance to its own leaf.

The soft target of a sample of leaf a on leaf j is exp(-beta h(a, j)) / sum_k exp(-beta h(a, k)), with
h(a, j) the height of a and j's lowest common ancestor over the trained levels, normalised to [0, 1] (0:
the same leaf; 1: no trained level in common). The logits are -d(z, p_j) / tau in the cell's geometry, so
the objective is geometry-agnostic like the paper's two, and takes its geometry's temperature.

The prototypes are the objective's own parameters: the engine learns them (one [N, D] tensor a cell,
mapped into the geometry by its ``embed``), counts them apart from the projector and hands this class
their distances (``prototype_dist``); they shape training only, as a classifier head would, and retrieval
ranks by the projector's embeddings alone.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hierconsole.config.preset import TrainingConfig
from hierconsole.engine.losses import relation_codes


def soft_targets(labels: Tensor, leaf_labels: Tensor, beta: float) -> Tensor:
    """[B, N] soft targets of samples ``labels`` [B, K] over the leaves ``leaf_labels`` [N, K]: the
    softmax over leaves of -beta times the normalised height of their lowest common ancestor."""
    k = labels.shape[1]
    height = relation_codes(labels, leaf_labels).to(torch.float64) / k
    return torch.softmax(-beta * height, dim=-1)


class SoftCE:
    """Cross-entropy between the soft targets and the softmax over leaves of -d(z, prototype) / tau."""

    uses_tau = True
    prototypes = True
    beta = 10.0
    """The label smoothing's sharpness (the paper swept 4 to 30): subclass to choose another."""

    def loss(
        self,
        dist: Tensor,  # noqa: ARG002 - the within-batch distances: not this objective's
        labels: Tensor,
        *,
        tau: Tensor | None,
        training: TrainingConfig,  # noqa: ARG002
        prototype_dist: Tensor,
        leaf_labels: Tensor,
    ) -> Tensor:
        """[C] losses from ``prototype_dist`` [C, B, N] (each sample's distance to each leaf's prototype):
        the mean over the batch of the cross-entropy between its soft target and its softmax over leaves."""
        if tau is None:
            raise ValueError("soft-label cross-entropy needs a temperature")
        target = soft_targets(labels, leaf_labels, self.beta).to(prototype_dist.dtype)
        # One temperature a cell ([C] for [C, B, N] distances; a 0-dim one for a single cell's [B, N]).
        logits = -prototype_dist / tau.reshape(*tau.shape, 1, 1)
        log_prob = torch.log_softmax(logits, dim=-1)
        return -(target * log_prob).sum(dim=-1).mean(dim=-1)
