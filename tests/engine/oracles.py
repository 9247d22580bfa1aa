"""Slow, plain definitions the engine's fast paths are tested against (test code, not product)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from hierconsole.engine.geometry import Euclidean, Geometry, Poincare, _check_pair, _sanitised
from hierconsole.engine.hier_style import GumbelStream
from hierconsole.engine.retrieval import (
    DEFAULT_KS,
    DEFAULT_MEMORY_BUDGET,
    Evaluation,
    _check_ks,
    _check_rows,
    _evaluate_rows,
    as_label_tensor,
    chunk_rows,
)
from hierconsole.levels import Levels


def pairwise_reference(geometry: Geometry, x: Tensor, y: Tensor | None = None, *, clip_max: float) -> Tensor:
    """The distances ``geometry.pairwise`` gives, by broadcasting [..., N, 1, D] against [..., 1, M, D]:
    the plain difference norm for Euclidean, geoopt's ``ball.dist`` for Poincaré (inputs projected first)."""
    y = x if y is None else y
    _check_pair(x, y)
    if isinstance(geometry, Poincare):
        x, y = geometry.ball.projx(x), geometry.ball.projx(y)
        d = geometry.ball.dist(x.unsqueeze(-2), y.unsqueeze(-3))
    else:
        assert isinstance(geometry, Euclidean)
        d = (x.unsqueeze(-2) - y.unsqueeze(-3)).norm(p=2, dim=-1)
    return _sanitised(d, clip_max)


def gumbel_noise(
    n: int, p: int, seeds: tuple[int, int], dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor]:
    """The whole [n, p] Gumbel noise -log(e) of each choice that ``triplet_ancestor_loss`` draws block by
    block, the log taken in ``dtype`` (e is float32; the loss uses 1/e in the distances' dtype)."""
    e1, e2 = GumbelStream(seeds, p).next(n)
    return e1.to(dtype).log_().neg_(), e2.to(dtype).log_().neg_()


def evaluate_distances(
    dist: Tensor,
    q_labels: np.ndarray | Tensor,
    g_labels: np.ndarray | Tensor,
    ks: Sequence[int] = DEFAULT_KS,
    chunk_size: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    levels: Levels | None = None,
    bits_for: Callable[[int, int], Tensor] | None = None,
) -> Evaluation:
    """Strict retrieval from a precomputed [Q, G] distance matrix (smaller = closer); not modified.

    ``bits_for(start, stop)`` replaces the strict positives of those query rows (another path's bits)."""
    ks = _check_ks(ks)
    if dist.dim() != 2:
        raise ValueError(f"dist must be [Q, G]; got shape {tuple(dist.shape)}")
    q_lab = as_label_tensor(q_labels, dist.device)
    g_lab = as_label_tensor(g_labels, dist.device)
    _check_rows(dist.shape[0], q_lab, dist.shape[1], g_lab)
    chunk = chunk_size or chunk_rows(dist.shape[1], memory_budget)
    return _evaluate_rows(
        dist.shape[0], dist.shape[1], lambda a, b: dist[a:b], q_lab, g_lab, ks, chunk, memory_budget, bits_for, levels
    )
