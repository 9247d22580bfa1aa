"""The paper's two objectives as factorial components: regression to tree-distance targets (Eq. 8) and
Taxonomy-SupCon (Eqs. 9-11). Their mathematics is `engine.losses`; these classes give it the objective
protocol of `components.registry`, so the paper's cells and one's own are trained by one loop."""

from __future__ import annotations

from torch import Tensor

from hierconsole.config.preset import TrainingConfig
from hierconsole.engine.losses import regression_loss, taxonomy_supcon_loss


class Regression:
    """SmoothL1 between each pair's distance and the target of its relation (the preset's targets)."""

    uses_tau = False

    def loss(self, dist: Tensor, labels: Tensor, *, tau: Tensor | None, training: TrainingConfig) -> Tensor:  # noqa: ARG002
        return regression_loss(dist, labels, targets=training.regression_targets)


class TaxonomySupCon:
    """Supervised contrastive loss with strict positives at every trained level, one weight per level."""

    uses_tau = True

    def loss(self, dist: Tensor, labels: Tensor, *, tau: Tensor | None, training: TrainingConfig) -> Tensor:
        if tau is None:
            raise ValueError("Taxonomy-SupCon needs a temperature")
        return taxonomy_supcon_loss(dist, labels, tau, weights=training.level_weights)
