"""A mixed-curvature product space E x H (Gu et al., ICLR 2019): a Euclidean half and a Poincaré half.

The first D // 2 raw output coordinates are embedded as ``Euclidean`` does (L2-normalised), the remaining
D - D // 2 as ``Poincare(c, r)`` does, and the two are concatenated, so an embedding is as wide as the
projector's output. The distance is the product metric's, as geoopt's ``ProductManifold.dist``:
d = sqrt(d_E^2 + d_H^2).

``pairwise`` reuses the two fast paths (one GEMM each, never an [N, M, D] temporary) and inherits their
Gram-matrix cancellation for near pairs (see geometry.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hierconsole.engine.geometry import (
    Euclidean,
    Geometry,
    Poincare,
    _check_pair,
    _safe_sqrt,
    _sanitised,
    _zero_diagonal,
)

PRODUCT = "product"


def split_width(width: int) -> int:
    """The width D // 2 of the Euclidean half of a D-wide output or embedding (the rest is Poincaré)."""
    if width < 2:
        raise ValueError(f"a product embedding needs a width of at least 2 (one per factor); got {width}")
    return width // 2


class Product(Geometry):
    """The product of a Euclidean factor and a Poincaré ball of curvature -c (tangent scale r).

    Without ``r`` the space only measures distances: ``embed`` needs the Poincaré half's tangent scale.
    """

    name = PRODUCT

    def __init__(self, c: float, r: float | None = None):
        super().__init__()
        self.euclidean = Euclidean()
        # Poincare validates c and r (ConfigError) and holds the curvature exactly, as it does on its own.
        self.poincare = Poincare(c, r)

    @property
    def c(self) -> float:
        return self.poincare.c

    @property
    def r(self) -> float | None:
        return self.poincare.r

    def extra_repr(self) -> str:
        return f"c={self.c}, r={self.r}"

    def embed(self, t: Tensor) -> Tensor:
        """Raw outputs [..., D] to [..., D]: the unit-norm first D // 2, the Poincaré rest."""
        n1 = split_width(t.shape[-1])
        return torch.cat([self.euclidean.embed(t[..., :n1]), self.poincare.embed(t[..., n1:])], dim=-1)

    def pairwise(self, x: Tensor, y: Tensor | None = None, *, clip_max: float) -> Tensor:
        """d = sqrt(d_E^2 + d_H^2) over the two halves, sanitised and clipped to [0, clip_max].

        The parts are clipped at clip_max too, which leaves the result exact: the combination is at least
        as large as either part, so a part at or beyond the bound (or undefined, hence at the bound) puts
        the combination at the bound either way, and parts below it are untouched. A larger part clip would
        buy nothing and could overflow when squared.
        """
        same = y is None or y is x
        y = x if y is None else y
        _check_pair(x, y)
        n1 = split_width(x.shape[-1])
        # y=None within each half: their diagonals are then exactly zero and carry no gradient.
        d_e = self.euclidean.pairwise(x[..., :n1], None if same else y[..., :n1], clip_max=clip_max)
        d_h = self.poincare.pairwise(x[..., n1:], None if same else y[..., n1:], clip_max=clip_max)
        if d_e.requires_grad or d_h.requires_grad:
            sq = d_e * d_e + d_h * d_h
        else:
            sq = d_e.mul_(d_e).addcmul_(d_h, d_h)
        # _safe_sqrt floors at eps^2: a zero (the diagonal, a duplicate) gets a zero slope, not 0 * inf
        d = _safe_sqrt(sq)
        if same:
            d = _zero_diagonal(d)
        return _sanitised(d, clip_max)
