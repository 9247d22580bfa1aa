"""Euclidean and Poincaré embedding maps and pairwise distances (paper Sec. 3.2 and S5).

Both geometries share one interface: ``embed`` maps the projector's raw output to the geometry, and
``pairwise`` gives the [..., N, M] distance matrix between two sets of embeddings ``[..., N, D]`` and
``[..., M, D]`` (a leading cell/batch axis is allowed). ``pairwise`` is the fast path used for training and
evaluation; tests/engine/oracles.py broadcasts the plain definition (geoopt's ``ball.dist`` for Poincaré)
and is what the fast path is tested against.

The fast path builds every distance from one GEMM over the embedding width plus two columns, so it never
materialises an [N, M, D] temporary. The price is the usual Gram-matrix cancellation: for two points closer
than about sqrt(eps) * |x| (3e-4 in float32 at unit norm) the distance carries an absolute error of that
size, which the reference (a direct difference) does not. Far pairs agree with geoopt to ~1e-6 in float32.
"""

from __future__ import annotations

import math

import geoopt
import torch
from torch import Tensor, nn

from hierconsole.config.options import Invalid
from hierconsole.config.preset import CURVATURE, TANGENT_SCALE, PoincareConfig
from hierconsole.errors import ConfigError
from hierconsole.registry import component, load
from hierconsole.vocabulary import EUCLIDEAN, GEOMETRIES, POINCARE

# geoopt's Poincaré math is TorchScript. The profiling executor re-specialises a scripted function after
# its first calls, and the specialised graph rounds differently, so the same inputs gave different
# gradients depending on how often the function had already run in the process: a resumed run (fewer
# prior calls) drifted from an uninterrupted one. Plain interpretation keeps every call bit-identical.
torch._C._jit_set_profiling_executor(False)

TRAIN_CLIP = 20.0
"""Upper clip of training distances (paper S5)."""
EVAL_CLIP = 1e6
"""Upper clip of evaluation distances (paper S5)."""

TANGENT_NORM_FLOOR = 1e-6
"""The tangent-norm clamp n = max(|t|, 1e-6) of paper Eq. (6): the project-level numerical constant."""


def ball_radius(c: float) -> float:
    """Radius 1/sqrt(c) of the Poincaré ball of absolute curvature c."""
    return 1.0 / math.sqrt(c)


def norm_bound(c: float, r: float) -> float:
    """Largest Euclidean norm an embedding can reach: tanh(sqrt(c) r) / sqrt(c).

    |t'| <= r after Eq. (6), and expmap0 maps a tangent norm s to tanh(sqrt(c) s) / sqrt(c).
    """
    return math.tanh(math.sqrt(c) * r) / math.sqrt(c)


def sqrt_floor(dtype: torch.dtype) -> float:
    # Squared distances at or below eps^2 count as zero: the square root then has a zero gradient there
    # instead of an infinite one (0 * inf = NaN on the diagonal), and a forward value moves by at most eps.
    return torch.finfo(dtype).eps ** 2


def _safe_sqrt(sq: Tensor) -> Tensor:
    if sq.requires_grad:
        return sq.clamp_min(sqrt_floor(sq.dtype)).sqrt()
    # No autograd (evaluation): work in place, so a [chunk, gallery] matrix costs one buffer, not three.
    return sq.clamp_min_(sqrt_floor(sq.dtype)).sqrt_()


def _acosh_one_plus_two(v: Tensor) -> Tensor:
    """acosh(1 + 2v) for v >= 0, as log1p(2(v + sqrt(v(1 + v)))).

    acosh(z) = log(z + sqrt(z^2 - 1)) with z = 1 + 2v, written so that small v keeps full relative precision
    (no rounding of 1 + tiny) and the slope stays finite at v = 0 (v is floored like a squared distance).
    torch.acosh/asinh are also ~5x slower on CPU than this vectorised log1p/sqrt chain.
    """
    floor = sqrt_floor(v.dtype)
    if v.requires_grad:
        w = v.clamp_min(floor)
        return torch.log1p(2.0 * (w + torch.addcmul(w, w, w).sqrt()))
    w = v.clamp_min_(floor)
    return torch.addcmul(w, w, w).sqrt_().add_(w).mul_(2.0).log1p_()


def _sanitised(d: Tensor, clip_max: float) -> Tensor:
    # NaN and +inf become the clip bound: an undefined distance must never look like a near neighbour.
    if d.requires_grad:
        return torch.nan_to_num(d, nan=clip_max, posinf=clip_max, neginf=0.0).clamp(0.0, clip_max)
    return d.nan_to_num_(nan=clip_max, posinf=clip_max, neginf=0.0).clamp_(0.0, clip_max)


def _zero_diagonal(d: Tensor) -> Tensor:
    n = d.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=d.device)
    return d.masked_fill(eye, 0.0)


def _check_pair(x: Tensor, y: Tensor) -> None:
    if x.dim() < 2 or y.dim() < 2:
        raise ValueError(f"embeddings must be [..., N, D]; got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"embedding widths differ: {x.shape[-1]} vs {y.shape[-1]}")
    if x.dtype != y.dtype:
        raise ValueError(f"embedding dtypes differ: {x.dtype} vs {y.dtype}")


class Geometry(nn.Module):
    """An embedding map plus its distance. Subclasses set ``name`` (the code name used in presets)."""

    name: str = ""

    def embed(self, t: Tensor) -> Tensor:
        """Map raw projector outputs [..., D] into the geometry."""
        raise NotImplementedError

    def pairwise(self, x: Tensor, y: Tensor | None = None, *, clip_max: float) -> Tensor:
        """Distances [..., N, M], sanitised and clipped to [0, clip_max].

        ``y`` None (or the same tensor object as ``x``) means distances within ``x``: the diagonal is then
        exactly zero. Use TRAIN_CLIP for training and EVAL_CLIP for evaluation.
        """
        raise NotImplementedError

    def forward(self, t: Tensor) -> Tensor:
        return self.embed(t)


class Euclidean(Geometry):
    """L2-normalised outputs (Eq. 5) and Euclidean distance."""

    name = EUCLIDEAN

    def embed(self, t: Tensor) -> Tensor:
        return nn.functional.normalize(t, p=2.0, dim=-1)

    def pairwise(self, x: Tensor, y: Tensor | None = None, *, clip_max: float) -> Tensor:
        same = y is None or y is x
        y = x if y is None else y
        _check_pair(x, y)
        x2 = (x * x).sum(-1, keepdim=True)
        y2 = (y * y).sum(-1, keepdim=True)
        # |x|^2 + |y|^2 - 2<x, y> as one GEMM: [-2x, |x|^2, 1] . [y, 1, |y|^2]
        left = torch.cat([-2.0 * x, x2, torch.ones_like(x2)], dim=-1)
        right = torch.cat([y, torch.ones_like(y2), y2], dim=-1)
        d = _safe_sqrt(left @ right.transpose(-1, -2))
        if same:
            d = _zero_diagonal(d)
        return _sanitised(d, clip_max)


class _ExactCurvatureBall(geoopt.PoincareBall):
    """geoopt's Poincaré ball holding the absolute curvature exactly, in float64, as a frozen buffer.

    geoopt stores softplus^-1(c) as a parameter and recomputes c on every call; that round trip turns
    1e-6 into 9.99999999962e-07 in float64 (and is off by 5% when built in float32). The parameter is
    removed, so the curvature can neither train nor be counted, and the buffer is not persistent, so a
    Poincaré projector's state_dict has the same keys as a Euclidean one.
    """

    def __init__(self, c: float):
        super().__init__(c=torch.tensor(c, dtype=torch.float64), learnable=False)
        del self.isp_c
        self.register_buffer("c_exact", torch.tensor(c, dtype=torch.float64), persistent=False)

    @property
    def c(self) -> Tensor:
        return self.c_exact


def operating_point(model: str, c: float, r: float | None) -> tuple[float, float | None]:
    """(c, r) of a hyperbolic model checked as a preset's [geometry.poincare] is, for values that come from
    elsewhere; ConfigError naming the model otherwise. Without r the model only measures distances."""
    for label, check, value in (("curvature c", CURVATURE, c), ("tangent scale r", TANGENT_SCALE, r)):
        if value is None and check is TANGENT_SCALE:
            continue
        try:
            check(value)
        except Invalid as exc:
            raise ConfigError(f"{model} {label} = {value!r}: {exc}") from None
    return float(c), None if r is None else float(r)


class Poincare(Geometry):
    """The Poincaré ball of absolute curvature c (sectional curvature -c), tangent scale r (Eqs. 6-7).

    Arithmetic runs in the embeddings' dtype; only the curvature is held in float64. Without ``r`` the ball
    only measures distances (scoring embeddings a user brings): ``embed`` needs the tangent scale.
    """

    name = POINCARE

    def __init__(self, c: float, r: float | None = None):
        super().__init__()
        self.c, self.r = operating_point("Poincaré", c, r)
        self.ball = _ExactCurvatureBall(self.c)

    def extra_repr(self) -> str:
        return f"c={self.c}, r={self.r}"

    def _apply(self, fn, recurse=True):
        # .to(device) / .float() / .half() leave the curvature a float64 CPU scalar: a float32 c rounds the
        # 1e-6 control, and geoopt branches on c in Python (torch.all(k < 0)), which would force a GPU
        # sync on every call if it lived on the device. CPU 0-dim tensors combine with CUDA tensors.
        return self

    def embed(self, t: Tensor) -> Tensor:
        if self.r is None:
            raise ValueError("this Poincaré ball has no tangent scale r: it measures distances only")
        n = t.norm(p=2, dim=-1, keepdim=True).clamp_min(TANGENT_NORM_FLOOR)
        t_scaled = self.r * torch.tanh(n) * t / n
        return self.ball.projx(self.ball.expmap0(t_scaled))

    def pairwise(self, x: Tensor, y: Tensor | None = None, *, clip_max: float) -> Tensor:
        """Closed form d = acosh(1 + 2c|x-y|^2 / ((1-c|x|^2)(1-c|y|^2))) / sqrt(c), inputs projected first.

        With v = c|x-y|^2 / ((1-c|x|^2)(1-c|y|^2)) the acosh argument is 1 + 2v; v is clamped at 0 (so
        the argument is >= 1) and acosh is evaluated in a form that is exact near 1 (see
        ``_acosh_one_plus_two``). The denominators are floored at eps for points on the boundary.
        """
        same = y is None or y is x
        y = x if y is None else y
        _check_pair(x, y)
        x = self.ball.projx(x)
        y = x if same else self.ball.projx(y)
        c = self.c
        # projx already keeps c|x|^2 <= (1 - 4e-3)^2 (float32) or (1 - 1e-5)^2 (float64); the floor keeps the
        # division finite should a point still reach the boundary.
        guard = torch.finfo(x.dtype).eps
        x2 = (x * x).sum(-1, keepdim=True)
        y2 = (y * y).sum(-1, keepdim=True)
        inv_ax = 1.0 / (1.0 - c * x2).clamp_min(guard)
        inv_ay = 1.0 / (1.0 - c * y2).clamp_min(guard)
        # v as one GEMM: [-2c x/ax, c|x|^2/ax, c/ax] . [y/ay, 1/ay, |y|^2/ay]
        left = torch.cat([(-2.0 * c) * x * inv_ax, c * x2 * inv_ax, c * inv_ax], dim=-1)
        right = torch.cat([y * inv_ay, inv_ay, y2 * inv_ay], dim=-1)
        d = _acosh_one_plus_two(left @ right.transpose(-1, -2))
        d = d * (1.0 / math.sqrt(c)) if d.requires_grad else d.mul_(1.0 / math.sqrt(c))
        if same:
            d = _zero_diagonal(d)
        return _sanitised(d, clip_max)


def make_geometry(name: str, *, c: float | None = None, r: float | None = None) -> Geometry:
    """A geometry by code name; ``c`` (required) and ``r`` apply to "poincare" only."""
    if name == EUCLIDEAN:
        return Euclidean()
    if name == POINCARE:
        if c is None:
            raise ConfigError("a Poincaré geometry needs its curvature c")
        return Poincare(c=c, r=r)
    raise ConfigError(f"unknown geometry {name!r}; use one of {', '.join(GEOMETRIES)}")


def geometry_of(name: str, poincare: PoincareConfig) -> Geometry:
    """A cell's geometry at the study's Poincaré operating point (ignored by the Euclidean head): a
    built-in by name, or a component of one's own (`module:Name`), built as ``Cls(c=c, r=r)``."""
    if name in GEOMETRIES:
        return make_geometry(name, c=poincare.c, r=poincare.r)
    cls = load(component("geometry", name))
    return cls(c=poincare.c, r=poincare.r)
