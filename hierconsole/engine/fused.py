"""Geometry heads and losses of a stack of cells in closed form: each cell's loss and its gradient in one pass.

Autograd through ``geometry.embed``/``pairwise`` and ``losses.*`` records some 300 small nodes per step, and
at batch 128 their dispatch costs more than their arithmetic (about a third of a step on one core).
Here one forward pass computes every cell's loss together with its gradient with respect to the raw
projector outputs, from the derivatives written out below; ``batched`` hands that gradient on through a
custom autograd Function. The formulas are those of geometry.py and losses.py with the same guards, and
the gradient is cut exactly where theirs is (at each clamp's bound it still passes, as torch's does).
Tests hold them to autograd through the library in float64 (values 1e-12, gradients 1e-9 relative).

Notation: t raw outputs [k, B, O], z embeddings, d distances [k, B, B]; ``g*`` is the gradient of the
summed cell losses with respect to ``*``. Each function returns its value and a ``back`` closure.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from hierconsole.engine.geometry import TANGENT_NORM_FLOOR, Euclidean, Geometry, Poincare, sqrt_floor
from hierconsole.engine.losses import taxonomy_supcon_loss
from hierconsole.engine.retrieval import strict_masks
from hierconsole.errors import NoPositivePairsError

Back = Callable[[Tensor], Tensor]
NORMALIZE_EPS = 1e-12  # F.normalize's default denominator floor
GEOOPT_MIN_NORM = 1e-15  # geoopt's norm floor in expmap0 and projx
GEOOPT_TANH_CLIP = 15.0  # geoopt's tanh(x) clamps x to [-15, 15]
GEOOPT_ZERO_CURVATURE = 1e-8  # geoopt switches to a Taylor series when |k| is within isclose() of 0


def supported(geometry: Geometry) -> bool:
    """Whether the closed forms here cover this geometry (else the caller falls back to autograd)."""
    if isinstance(geometry, Euclidean):
        return True
    if isinstance(geometry, Poincare):
        r = geometry.r
        return r is not None and geometry.c > GEOOPT_ZERO_CURVATURE and math.sqrt(geometry.c) * r <= GEOOPT_TANH_CLIP
    return False


def _ball_eps(dtype: torch.dtype) -> float:
    return 4e-3 if dtype == torch.float32 else 1e-5  # geoopt's projx margin


def _rowdot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1, keepdim=True)


# -- embeddings -------------------------------------------------------------------------------------------
def euclidean_embed(t: Tensor) -> tuple[Tensor, Back]:
    """F.normalize(t): z = t / max(|t|, 1e-12)."""
    a = torch.linalg.vector_norm(t, dim=-1, keepdim=True)
    den = a.clamp_min(NORMALIZE_EPS)
    z = t / den
    live = a >= NORMALIZE_EPS  # where the floor binds, den is a constant

    def back(gz: Tensor) -> Tensor:
        return (gz - torch.where(live, z * _rowdot(z, gz), 0.0)) / den

    return z, back


def poincare_embed(t: Tensor, c: float, r: float) -> tuple[Tensor, Back]:
    """Eq. (6) then geoopt's expmap0 and projx: z = gamma(|t|) t, a radial map.

    With a = |t|, the magnitude M(a) = |z| is tanh(sqrt(c) b) / sqrt(c) where b = |t'| = r tanh(a)
    (b = alpha0 a below the tangent floor 1e-6), capped at geoopt's maxnorm (1 - eps) / sqrt(c). The
    gradient of a radial map: gt = gamma gz + (M'(a) - gamma) (t.gz) t / a^2, with gamma = M / a.
    """
    sc = math.sqrt(c)
    a = torch.linalg.vector_norm(t, dim=-1, keepdim=True)
    n = a.clamp_min(TANGENT_NORM_FLOOR)
    tanh_n = torch.tanh(n)
    alpha = r * tanh_n / n  # t' = alpha t
    b = alpha * a
    bc = b.clamp_min(GEOOPT_MIN_NORM)
    s = sc * bc
    th = torch.tanh(s.clamp(-GEOOPT_TANH_CLIP, GEOOPT_TANH_CLIP))
    beta = th / s  # expmap0: z0 = (tanh(sqrt(c) bc) / sqrt(c)) t' / bc
    gamma0 = alpha * beta
    q = (gamma0 * a).clamp_min(GEOOPT_MIN_NORM)  # |z0|
    maxnorm = (1.0 - _ball_eps(t.dtype)) / sc
    projected = q > maxnorm
    gamma = torch.where(projected, gamma0 * (maxnorm / q), gamma0)
    z = gamma * t

    # dM/da = dM/db * db/da, each factor zero where a clamp cuts the gradient
    db_da = torch.where(a >= TANGENT_NORM_FLOOR, r * (1.0 - tanh_n * tanh_n), alpha)
    dm_db = torch.where(b >= GEOOPT_MIN_NORM, (1.0 - th * th) * (s <= GEOOPT_TANH_CLIP), beta)
    dm_da = torch.where(projected, 0.0, dm_db * db_da)
    a_safe = torch.where(a > 0, a, 1.0)
    radial = (dm_da - gamma) / (a_safe * a_safe)

    def back(gz: Tensor) -> Tensor:
        return gamma * gz + radial * _rowdot(t, gz) * t

    return z, back


# -- distances ------------------------------------------------------------------------------------------
def offdiag_mask(n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """[n, n] float mask: 1 off the diagonal, 0 on it (float masks multiply faster than bools select)."""
    return 1.0 - torch.eye(n, dtype=dtype, device=device)


@functools.lru_cache(maxsize=16)
def _diagonal_masks(n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    # offdiag_mask and its -inf counterpart, built once per batch size rather than once per step (every
    # step of a job has the same batch size). Shared: nothing may write into them.
    offdiag = offdiag_mask(n, dtype, device)
    return offdiag, torch.zeros_like(offdiag).fill_diagonal_(float("-inf"))


def _slope_mask(d_pre: Tensor, above_floor: Tensor, offdiag: Tensor, clip_max: float) -> Tensor:
    # geometry overwrites the diagonal with 0, replaces NaN/inf and clamps to [0, clip]: the gradient
    # survives off the diagonal where the value was finite and inside the clamp (NaN and inf fail the
    # comparison; these distances are never negative), and where the floor under the root did not bind.
    return ((d_pre <= clip_max) & above_floor) * offdiag


def _sanitise(d_pre: Tensor, offdiag: Tensor, clip_max: float) -> Tensor:
    return torch.nan_to_num(d_pre, nan=clip_max, posinf=clip_max).clamp_(max=clip_max).mul_(offdiag)


def euclidean_pairwise(x: Tensor, clip_max: float, offdiag: Tensor | None = None) -> tuple[Tensor, Back]:
    """Euclidean.pairwise(x, x): d = sqrt(max(|xi|^2 + |xj|^2 - 2 xi.xj, eps^2)), diagonal 0, clipped."""
    x2 = _rowdot(x, x)
    ones = torch.ones_like(x2)
    sq = torch.cat([-2.0 * x, x2, ones], dim=-1) @ torch.cat([x, ones, x2], dim=-1).transpose(-1, -2)
    floor = sqrt_floor(x.dtype)
    d_pre = sq.clamp_min(floor).sqrt()
    offdiag = offdiag_mask(x.shape[-2], x.dtype, x.device) if offdiag is None else offdiag
    slope = _slope_mask(d_pre, sq >= floor, offdiag, clip_max).div_(2.0 * d_pre)  # dd/dsq where kept
    d = _sanitise(d_pre, offdiag, clip_max)

    def back(gd: Tensor) -> Tensor:
        gs = gd * slope
        g = gs + gs.transpose(-1, -2)  # x is both arguments
        return 2.0 * (x * g.sum(-1, keepdim=True) - g @ x)

    return d, back


def poincare_pairwise(
    x: Tensor, c: float, clip_max: float, offdiag: Tensor | None = None
) -> tuple[Tensor, Back]:
    """Poincare.pairwise(x, x): d = acosh(1 + 2v) / sqrt(c), v = c|xi - xj|^2 P_i P_j, P = 1/max(1 - c|x|^2, eps).

    dv/dxk (first argument) = 2c P_k P_j (x_k - x_j) + 2c P_k x_k v_kj  (the second term where 1 - c|x_k|^2
    is above its floor), and d acosh(1 + 2w)/dw = 1 / sqrt(w (1 + w)). ``x`` comes from poincare_embed,
    already inside geoopt's projection bound, so the projx that Poincare.pairwise applies first is skipped.
    """
    guard = torch.finfo(x.dtype).eps
    x2 = _rowdot(x, x)
    den = 1.0 - c * x2
    p = 1.0 / den.clamp_min(guard)
    left = torch.cat([(-2.0 * c) * x * p, c * x2 * p, c * p], dim=-1)
    right = torch.cat([x * p, p, x2 * p], dim=-1)
    v = left @ right.transpose(-1, -2)
    floor = sqrt_floor(x.dtype)
    w = v.clamp_min(floor)
    root = torch.addcmul(w, w, w).sqrt()
    d_pre = torch.log1p(2.0 * (w + root)) * (1.0 / math.sqrt(c))
    offdiag = offdiag_mask(x.shape[-2], x.dtype, x.device) if offdiag is None else offdiag
    slope = _slope_mask(d_pre, v >= floor, offdiag, clip_max).div_(math.sqrt(c) * root)  # dd/dv where kept
    d = _sanitise(d_pre, offdiag, clip_max)
    live = den >= guard  # where the floor binds, P is a constant

    def back(gd: Tensor) -> Tensor:
        gw = gd * slope
        g = gw + gw.transpose(-1, -2)
        h = g * p.transpose(-1, -2)  # h_kj = g_kj P_j
        first = x * h.sum(-1, keepdim=True) - h @ x
        second = torch.where(live, x * (g * v).sum(-1, keepdim=True), 0.0)
        return (2.0 * c) * p * (first + second)

    return d, back


def embed_and_distances(
    geometry: Geometry, t: Tensor, clip_max: float, offdiag: Tensor | None = None
) -> tuple[Tensor, Back]:
    """Distances [k, B, B] of raw outputs t [k, B, O] under ``geometry``, with the gradient back to t."""
    if isinstance(geometry, Poincare):
        assert geometry.r is not None  # supported() holds only for balls with a tangent scale
        z, back_z = poincare_embed(t, geometry.c, geometry.r)
        d, back_d = poincare_pairwise(z, geometry.c, clip_max, offdiag)
    elif isinstance(geometry, Euclidean):
        z, back_z = euclidean_embed(t)
        d, back_d = euclidean_pairwise(z, clip_max, offdiag)
    else:
        raise TypeError(f"no closed form for {type(geometry).__name__}")
    return d, lambda gd: back_z(back_d(gd))


# -- losses ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BatchTargets:
    """What the losses need from one batch's labels, computed once and shared by every cell."""

    labels: Tensor
    offdiag: Tensor  # [B, B] float: 1 off the diagonal, 0 on it
    diagonal_minus_inf: Tensor  # [B, B] float: -inf on the diagonal, 0 off it
    regression_target: Tensor | None  # [B, B] target distance of each pair's relation
    supcon_weight: Tensor | None  # [B, B] A_ij: the loss is -sum_ij A_ij log p_ij
    supcon_row: Tensor | None  # [B] a_i = sum_j A_ij
    level_weights: tuple[float, ...]  # one per label column, as given; taxonomy_supcon_loss checks the count

    @classmethod
    def build(
        cls,
        labels: Tensor,
        dtype: torch.dtype,
        *,
        targets: Sequence[float] | None,
        level_weights: Sequence[float] | None,
        host_labels: Tensor | None = None,
    ) -> BatchTargets:
        """Targets for the regression loss (``targets`` given) and SupCon (``level_weights`` given).

        SupCon skips levels without an anchor, a decision taken on the host; ``host_labels`` (a CPU copy
        of ``labels``) lets an accelerator take it without waiting for the device.
        """
        offdiag, minus_inf = _diagonal_masks(labels.shape[0], dtype, labels.device)
        # The strict masks (leaf mask with its diagonal) are also the relations of losses.relation_codes:
        # level 0 where the leaves agree, else level k where the level-k ancestors first do, else "other".
        positives = strict_masks(labels, labels)
        k = labels.shape[1]
        reg = None
        if targets is not None:
            t = [float(v) for v in targets]
            if len(t) != k + 1:
                raise ValueError(f"targets must give {k + 1} values for {k} levels, got {tuple(t)}")
            reg = torch.full(positives.shape[1:], t[k], dtype=dtype, device=labels.device)
            for lvl in reversed(range(k)):
                reg = torch.where(positives[lvl], t[lvl], reg)
        weight = row = None
        lw = tuple(float(w) for w in level_weights) if level_weights is not None else (1.0,) * k
        if level_weights is not None:
            if len(lw) != k:
                raise ValueError(f"level_weights must give {k} values, one per level; got {lw}")
            positives[0].fill_diagonal_(False)
            n_pos = positives.sum(dim=-1)  # [K, B]
            if host_labels is not None:
                host = strict_masks(host_labels, host_labels)
                host[0].fill_diagonal_(False)
                n_anchors = host.any(dim=-1).sum(dim=-1).tolist()
            else:
                n_anchors = (n_pos > 0).sum(dim=-1).tolist()
            active = [lvl for lvl in range(k) if lw[lvl] > 0 and n_anchors[lvl] > 0]
            if active:
                total = sum(lw[lvl] for lvl in active)
                # A_ij = sum over active levels l of (w_l / W) / (anchors_l * positives_l(i)) [j positive]
                for lvl in active:
                    per_row = (lw[lvl] / total / n_anchors[lvl]) / n_pos[lvl].clamp_min(1).to(dtype)
                    term = positives[lvl] * per_row.unsqueeze(-1)
                    weight = term if weight is None else weight + term
                assert weight is not None
                row = weight.sum(-1)
        return cls(labels, offdiag, minus_inf, reg, weight, row, lw)


def regression_value_grad(d: Tensor, tg: BatchTargets) -> tuple[Tensor, Tensor]:
    """losses.regression_loss per cell [k] and its gradient [k, B, B]: clamp(d - T, -1, 1) / (B(B - 1))."""
    assert tg.regression_target is not None
    b = d.shape[-1]
    diff = (d - tg.regression_target).mul_(tg.offdiag)  # the diagonal contributes nothing
    absd = diff.abs()
    per_pair = torch.where(absd < 1.0, 0.5 * diff * diff, absd - 0.5)
    scale = 1.0 / (b * (b - 1))
    loss = per_pair.sum((-1, -2)) * scale
    grad = diff.clamp_(-1.0, 1.0).mul_(scale)
    return loss, grad


def supcon_value_grad(d: Tensor, tau: Tensor, tg: BatchTargets) -> tuple[Tensor, Tensor]:
    """losses.taxonomy_supcon_loss per cell [k] (tau [k]) and its gradient [k, B, B].

    With log p = log_softmax(-d / tau) over j != i: loss = -sum_ij A_ij log p_ij and
    dloss/dd_ij = (A_ij - a_i p_ij) / tau.
    """
    if tg.supcon_weight is None or tg.supcon_row is None:
        taxonomy_supcon_loss(d, tg.labels, tau, weights=tg.level_weights)  # raises NoPositivePairsError
        raise NoPositivePairsError("no strict positive pair in this minibatch")  # pragma: no cover
    tau = tau.view(-1, 1, 1)
    # -inf on the diagonal takes self out of the denominator (exp gives exactly 0); d is finite.
    # d / (-tau) is -d / tau exactly (division is sign-symmetric), one [k, B, B] pass fewer.
    logits = torch.div(d, tau.neg()).add_(tg.diagonal_minus_inf)
    log_prob = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    prob = log_prob.exp()  # exactly 0 on the diagonal
    loss = -(tg.supcon_weight * torch.nan_to_num(log_prob, neginf=0.0)).sum((-1, -2))
    grad = (tg.supcon_weight - tg.supcon_row.unsqueeze(-1) * prob) / tau
    return loss, grad
