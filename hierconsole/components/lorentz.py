"""The hyperboloid (Lorentz) model of curvature -c: the Poincaré ball's points, held without a boundary.

The hyperboloid {x in R^(D+1) : -x0^2 + |x_s|^2 = -1/c, x0 > 0} is isometric to the Poincaré ball of the
same curvature, x_ball = x_s / (1 + sqrt(c) x0). ``Lorentz(c, r).embed`` is chosen to be exactly the image of
``Poincare(c, r).embed`` under that map, so the two geometries give the same distances for the same raw
outputs and differ only in their numerics: the ball crowds far points against its boundary, the
hyperboloid lets its coordinates grow instead.

``pairwise`` is one GEMM over the spatial width plus two columns, like geometry.py's fast paths, and has the
same Gram-matrix cancellation: two points closer than about sqrt(eps) * |x_s| (3e-4 in float32 at unit
norm) get a distance with an absolute error of that size, which a direct formula on well-separated points
does not show. Far pairs agree with geoopt's ``Lorentz.dist`` (float64) to ~1e-6.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import geoopt
import torch
from torch import Tensor

from hierconsole.engine.geometry import (
    TANGENT_NORM_FLOOR,
    Geometry,
    _acosh_one_plus_two,
    _check_pair,
    _sanitised,
    _zero_diagonal,
    operating_point,
)

LORENTZ = "lorentz"


class _ExactCurvatureHyperboloid(geoopt.Lorentz):
    """geoopt's hyperboloid holding k = 1/c exactly, in float64, as a frozen buffer.

    geoopt's ``Lorentz(k)`` is the hyperboloid <x, x>_L = -k (sectional curvature -1/k) and keeps k as a
    parameter. The parameter is removed, so k can neither train nor be counted, and the buffer is not
    persistent, so a Lorentz projector's state_dict has the same keys as a Euclidean one (as
    ``_ExactCurvatureBall`` does for the ball).
    """

    def __init__(self, c: float):
        super().__init__(k=torch.tensor(1.0 / c, dtype=torch.float64), learnable=False)
        del self.k
        self.register_buffer("k", torch.tensor(1.0 / c, dtype=torch.float64), persistent=False)


class Lorentz(Geometry):
    """The hyperboloid model of curvature -c, tangent scale r; embeddings are one wider than their input.

    Arithmetic runs in the embeddings' dtype; only the curvature is held in float64. Without ``r`` the
    geometry only measures distances: ``embed`` needs the tangent scale.
    """

    name = LORENTZ

    def __init__(self, c: float, r: float | None = None):
        super().__init__()
        self.c, self.r = operating_point("Lorentz", c, r)  # c and r mean what they mean for the ball
        self.manifold = _ExactCurvatureHyperboloid(self.c)

    def extra_repr(self) -> str:
        return f"c={self.c}, r={self.r}"

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Lorentz:
        # As Poincare: .to(device) / .float() leave k a float64 CPU scalar (a float32 k rounds the 1e-6
        # control; CPU 0-dim tensors combine with CUDA tensors without a transfer per call).
        return self

    def embed(self, t: Tensor) -> Tensor:
        """Raw outputs [..., D] to hyperboloid points [..., D + 1], the time coordinate first.

        t' = r tanh(|t|) t / |t| (paper Eq. 6, |t| floored at TANGENT_NORM_FLOOR), as for the ball. The
        ball's metric is 2/(1 - c|x|^2) times the Euclidean one, so at its origin the tangent t' has length
        2|t'| and the ball's expmap0 lands 2|t'| from the origin; the isometry's differential at the origin
        maps t' to (0, 2t'). Exponentiating (0, 2t') therefore gives the image of the ball's embedding, not
        a point at half its distance, which is what makes Lorentz(c, r) and Poincare(c, r) comparable.
        """
        if self.r is None:
            raise ValueError("this hyperboloid has no tangent scale r: it measures distances only")
        n = t.norm(p=2, dim=-1, keepdim=True).clamp_min(TANGENT_NORM_FLOOR)
        t_scaled = (2.0 * self.r) * torch.tanh(n) * t / n
        tangent = torch.cat([torch.zeros_like(t_scaled[..., :1]), t_scaled], dim=-1)
        # geoopt projects the result: x0 is recomputed as sqrt(1/c + |x_s|^2), so it lies on the hyperboloid
        return self.manifold.expmap0(tangent)

    def pairwise(self, x: Tensor, y: Tensor | None = None, *, clip_max: float) -> Tensor:
        """d = acosh(-c <x, y>_L) / sqrt(c), <x, y>_L = -x0 y0 + <x_s, y_s>, inputs projected first.

        The literal GEMM [-x0, x_s] . [y0, y_s] cancels catastrophically: x0 ~ 1/sqrt(c), so at c = 1e-6
        the products are ~1e6 while u = -c<x, y>_L - 1 ~ c|x_s - y_s|^2 / 2 ~ 1e-7, below float32's
        resolution of 1e6 * c. Projecting first (geoopt's projx: x0 = sqrt(1/c + |x_s|^2)) gives
        sqrt(c) x0 = 1 + e_x with e_x = c|x_s|^2 / (1 + sqrt(1 + c|x_s|^2)), free of cancellation, and

            u = (1 + e_x)(1 + e_y) - 1 - c<x_s, y_s> = e_x (1 + e_y) + e_y - c<x_s, y_s>,

        one GEMM whose cancellation is at the scale c|x_s|^2 of the distance itself, as in the Euclidean
        Gram form. Then acosh(1 + u) = ``_acosh_one_plus_two(u / 2)`` with u clamped at 0 (exact near 1).
        The given x0 is only checked: a non-finite one still makes the point undefined (distance clip_max).
        """
        same = y is None or y is x
        y = x if y is None else y
        _check_pair(x, y)
        c = self.c
        ex, xs = self._shifted_time(x)
        ey, ys = (ex, xs) if same else self._shifted_time(y)
        # u / 2 as one GEMM: [-c x_s / 2, e_x / 2, 1 / 2] . [y_s, 1 + e_y, e_y]
        left = torch.cat([(-0.5 * c) * xs, 0.5 * ex, torch.full_like(ex, 0.5)], dim=-1)
        right = torch.cat([ys, 1.0 + ey, ey], dim=-1)
        d = _acosh_one_plus_two(left @ right.transpose(-1, -2))
        d = d * (1.0 / math.sqrt(c)) if d.requires_grad else d.mul_(1.0 / math.sqrt(c))
        if same:
            d = _zero_diagonal(d)
        return _sanitised(d, clip_max)

    def _shifted_time(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(sqrt(c) x0 - 1 of the projected point [..., 1], the spatial coordinates [..., D])."""
        xs = x[..., 1:]
        cx2 = self.c * (xs * xs).sum(-1, keepdim=True)
        e = cx2 / (1.0 + torch.sqrt(1.0 + cx2))
        # 0 * x0 is NaN exactly when x0 is NaN or infinite: an undefined point must not look projected
        return e + 0.0 * x[..., :1], xs
