"""Flat SupCon: supervised contrastive learning on leaf labels alone, the control that isolates what the
taxonomy adds to Taxonomy-SupCon (same logits, temperature and denominator; positives only at the leaf)."""

from __future__ import annotations

from torch import Tensor

from hierconsole.config.preset import TrainingConfig
from hierconsole.engine.losses import leaf_only_weights, taxonomy_supcon_loss


class FlatSupCon:
    """Taxonomy-SupCon with all the weight on the leaf level: every other sample is a negative."""

    uses_tau = True

    def loss(self, dist: Tensor, labels: Tensor, *, tau: Tensor | None, training: TrainingConfig) -> Tensor:  # noqa: ARG002
        if tau is None:
            raise ValueError("flat SupCon needs a temperature")
        # Every level but the leaf weighs 0 and is skipped: the positives are the same leaf's samples.
        return taxonomy_supcon_loss(dist, labels, tau, weights=leaf_only_weights(labels.shape[1]))
