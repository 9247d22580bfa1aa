"""Checks every component geometry passes, each against its own references (test code, not product)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from hierconsole.engine.geometry import EVAL_CLIP, TRAIN_CLIP, Geometry

Reference = Callable[[Tensor, Tensor, float], Tensor]


def raw(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """Projector outputs of a spread that reaches the tangent-scale squashing."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 2.0


def leading_cell_axis(geometry: Geometry, c: float, formula: Reference, library: Reference, seeds: tuple[int, int], off_reference: Reference) -> None:
    """[C, N, M] distances equal the references and each cell's own [N, M]; within-set distances too."""
    x, y = geometry.embed(raw(4, 7, 6, seed=seeds[0])), geometry.embed(raw(4, 9, 6, seed=seeds[1]))
    batched, within = geometry.pairwise(x, y, clip_max=EVAL_CLIP), geometry.pairwise(x, clip_max=EVAL_CLIP)
    assert batched.shape == (4, 7, 9) and within.shape == (4, 7, 7)
    torch.testing.assert_close(batched, formula(x, y, c), rtol=0, atol=1e-6)
    torch.testing.assert_close(batched, library(x, y, c), rtol=0, atol=1e-6)
    for cell in range(4):
        torch.testing.assert_close(
            batched[cell], geometry.pairwise(x[cell], y[cell], clip_max=EVAL_CLIP), rtol=0, atol=1e-12
        )
        torch.testing.assert_close(within[cell], geometry.pairwise(x[cell], clip_max=EVAL_CLIP), rtol=0, atol=1e-12)
    off = ~torch.eye(7, dtype=torch.bool)
    torch.testing.assert_close(within[:, off], off_reference(x, x, c)[:, off], rtol=0, atol=1e-6)


def zero_diagonal_and_finite_gradient(geometry: Geometry, seed: int, dtype: torch.dtype) -> None:
    """Within-set distances: an exactly zero diagonal, a duplicate point near zero, finite gradients."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(12, 6, generator=g, dtype=dtype)
    t[5] = t[2]  # an exact duplicate: zero distance off the diagonal too
    t.requires_grad_(True)
    z = geometry.embed(t)
    d = geometry.pairwise(z, clip_max=TRAIN_CLIP)
    assert torch.equal(d.diagonal(), torch.zeros(12, dtype=dtype))
    assert d[2, 5].item() <= 1e-3
    d.sum().backward(retain_graph=True)
    assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0
    t.grad = None
    (d * torch.rand(12, 12, generator=g, dtype=dtype)).sum().backward()
    assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0
    # y given as the very same tensor is the same as y omitted
    assert torch.equal(geometry.pairwise(z, z, clip_max=TRAIN_CLIP), d)


def gradient_matches(geometry: Geometry, c: float, formula: Reference, width: int, seeds: tuple[int, int, int]) -> None:
    """The gradient through the fast path equals the one through the literal formula, off the diagonal."""
    tx = raw(6, width, seed=seeds[0]).requires_grad_(True)
    ty = raw(5, width, seed=seeds[1]).requires_grad_(True)
    w = torch.rand(6, 5, generator=torch.Generator().manual_seed(seeds[2]), dtype=torch.float64)
    grads = []
    for f in (functools.partial(geometry.pairwise, clip_max=EVAL_CLIP), functools.partial(formula, c=c)):
        gx, gy = torch.autograd.grad((f(geometry.embed(tx), geometry.embed(ty)) * w).sum(), (tx, ty))
        grads.append(torch.cat([gx, gy]))
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-6, atol=1e-9)
