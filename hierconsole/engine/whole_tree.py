"""The whole tree's metrics of one evaluation unit (a study's ``evaluation.metrics``: H-AP, ASI, NDCG@k,
mistake severity@k, CPCC), by `hierconsole.metrics` on the CPU, each query ranking the gallery by the cell's
own distances: those its strict metrics rank by (`retrieval`), clip included."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from hierconsole.engine.geometry import EVAL_CLIP, Geometry
from hierconsole.metrics.results import HIERARCHY


def whole_tree_metrics(
    names: Sequence[str],
    aggregation: str,
    query: Tensor,
    gallery: Tensor,
    q_labels: Tensor | np.ndarray,
    g_labels: Tensor | np.ndarray,
    geometry: Geometry,
) -> dict[str, float]:
    """{metric: its mean under ``aggregation``} (NaN where no query is defined for it); tensors on any
    device, which the library takes to the CPU."""
    # Imported here: the library's compiled passes need numba, which a worker scoring a study without
    # these metrics (and a GPU machine that carries only torch, numpy and geoopt) never loads.
    from hierconsole.metrics.evaluation import evaluate

    device = gallery.device

    def distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            d = geometry.pairwise(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device), clip_max=EVAL_CLIP)
        return d.cpu().numpy()

    # One worker: with a BLAS product inside the distances, a query's last bits follow its chunk's shape,
    # which one worker and the default budget keep the same at every evaluation and re-score.
    result = evaluate(
        query,
        gallery,
        q_labels,
        g_labels,
        metrics=tuple(names),
        geometry=distances,
        aggregate=aggregation,  # type: ignore[arg-type]
        workers=1,
    )
    return dict(result.to_dict()[HIERARCHY])
