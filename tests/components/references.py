"""Independent float64 references for the component geometries (test code, not product).

Each distance is written twice, neither sharing code with the fast paths: once as the plain textbook
formula broadcast over [..., N, 1, D] x [..., 1, M, D], once through geoopt's own manifolds. Embeddings
are written out coordinate by coordinate in Python floats.
"""

from __future__ import annotations

import math

import geoopt
import torch
from torch import Tensor


def _broadcast(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    return x.double().unsqueeze(-2), y.double().unsqueeze(-3)


def lorentz_formula(x: Tensor, y: Tensor, c: float) -> Tensor:
    """acosh(-c <x, y>_L) / sqrt(c) with <x, y>_L = -x0 y0 + sum_i xi yi, literally, in float64."""
    a, b = _broadcast(x, y)
    inner = -a[..., 0] * b[..., 0] + (a[..., 1:] * b[..., 1:]).sum(-1)
    return torch.acosh((-c * inner).clamp_min(1.0)) / math.sqrt(c)


def geoopt_hyperboloid(c: float) -> geoopt.Lorentz:
    """geoopt's hyperboloid <x, x>_L = -k of sectional curvature -c: k = 1/c."""
    return geoopt.Lorentz(k=torch.tensor(1.0 / c, dtype=torch.float64))


def lorentz_geoopt(x: Tensor, y: Tensor, c: float) -> Tensor:
    a, b = _broadcast(x, y)
    return geoopt_hyperboloid(c).dist(a, b)


def tangent(row: list[float], r: float) -> list[float]:
    """Paper Eq. (6): t' = r tanh(n) t / n with n = max(|t|, 1e-6)."""
    n = max(math.sqrt(sum(v * v for v in row)), 1e-6)
    return [r * math.tanh(n) * v / n for v in row]


def lorentz_point(row: list[float], c: float, r: float) -> list[float]:
    """The hyperboloid point 2|t'| from the origin in the direction of t' (the image of the ball's point):
    (cosh(sqrt(c) s) / sqrt(c), sinh(sqrt(c) s) / sqrt(c) * t'/|t'|) with s = 2|t'|."""
    tp = tangent(row, r)
    s = 2.0 * math.sqrt(sum(v * v for v in tp))
    sc = math.sqrt(c)
    scale = math.sinh(sc * s) / (sc * s) * 2.0 if s > 0 else 2.0  # sinh(sc s) / (sc |t'|), continuous at 0
    return [math.cosh(sc * s) / sc, *(scale * v for v in tp)]


def ball_point(row: list[float], c: float, r: float) -> list[float]:
    """Poincaré embedding (paper Eqs. 6-7): tanh(sqrt(c)|t'|) t' / (sqrt(c)|t'|)."""
    tp = tangent(row, r)
    s = math.sqrt(sum(v * v for v in tp))
    scale = math.tanh(math.sqrt(c) * s) / (math.sqrt(c) * s) if s > 0 else 1.0
    return [scale * v for v in tp]


def hyperboloid_to_ball(x: Tensor, c: float) -> Tensor:
    """The isometry onto the Poincaré ball: x_ball = x_s / (1 + sqrt(c) x0) (stereographic from (-1/sqrt c, 0))."""
    return x[..., 1:] / (1.0 + math.sqrt(c) * x[..., :1])


def ball_to_hyperboloid(b: Tensor, c: float) -> Tensor:
    """Its inverse: x0 = (1 + c|b|^2) / (sqrt(c) (1 - c|b|^2)), x_s = 2b / (1 - c|b|^2)."""
    cb2 = c * (b * b).sum(-1, keepdim=True)
    return torch.cat([(1.0 + cb2) / (math.sqrt(c) * (1.0 - cb2)), 2.0 * b / (1.0 - cb2)], dim=-1)


def product_formula(x: Tensor, y: Tensor, c: float) -> Tensor:
    """sqrt(|x_E - y_E|^2 + d_H^2), d_H = acosh(1 + 2c|x-y|^2 / ((1-c|x|^2)(1-c|y|^2))) / sqrt(c)."""
    n1 = x.shape[-1] // 2
    a, b = _broadcast(x, y)
    de2 = ((a[..., :n1] - b[..., :n1]) ** 2).sum(-1)
    ah, bh = a[..., n1:], b[..., n1:]
    num = 2.0 * c * ((ah - bh) ** 2).sum(-1)
    den = (1.0 - c * (ah * ah).sum(-1)) * (1.0 - c * (bh * bh).sum(-1))
    dh = torch.acosh(1.0 + num / den) / math.sqrt(c)
    return (de2 + dh * dh).sqrt()


def product_geoopt(x: Tensor, y: Tensor, c: float) -> Tensor:
    n1 = x.shape[-1] // 2
    space = geoopt.ProductManifold(
        (geoopt.Euclidean(1), n1),
        (geoopt.PoincareBall(c=torch.tensor(c, dtype=torch.float64)), x.shape[-1] - n1),
    )
    a, b = _broadcast(x, y)
    return space.dist(a, b)
