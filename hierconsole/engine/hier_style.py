"""The HIER-style baseline arm: a projector of the cells' shape trained on leaf labels with Proxy-Anchor
plus HIER's hierarchical regularisation with learnable hyperbolic proxies.

After Kim, Jeong and Kwak, "HIER: Metric learning beyond class labels via hierarchical regularization"
(CVPR 2023) and the authors' public code (written anew here from the method and its defaults):

- head: the projector's output is clipped to norm ``clip_r``, mapped to the Poincaré ball of curvature ``c``
  by expmap0 and projected into the ball; its gradient is rescaled by the ball's conformal factor,
  (1 - c|x|^2)^2 / 4, as hyptorch's RiemannianGradient does. Ranking is by the Poincaré distance at ``c``,
  as in HIER's evaluation;
- base loss: Proxy-Anchor (one proxy per leaf class, cosine similarity, scale alpha, margin delta);
- HIER term: learnable hyperbolic proxies (the candidate common ancestors). Triplets (i, j, k) are drawn per
  anchor: j among i's reciprocal k nearest neighbours (same-leaf pairs count as nearer), k among the others.
  A Gumbel-softmax (hard, straight-through) over the proxies picks the least common ancestor of (i, j) and of
  (i, j, k) by the larger of the members' distances; the term asks i and j to be closer to their own ancestor
  than to the triplet's, and k the reverse, by a margin, wherever the two ancestors differ. The same term is
  applied among the proxies themselves (their reciprocal neighbours, no labels).

Two recipes train it (``HierConfig.recipe``). ``authors`` is their sampler, head and optimiser
(engine.hier_recipe). ``matched`` departs from their setting to fit this study's protocol: the projector is
the cells' MLP and trains at the study's learning rate, batch size, gradient clip and batch order (so the same
init/batch/budget audits hold; ``hier_optimizer`` below), and the class-balanced sampler is replaced by that
shared batch order. Under both the backbone stays frozen (only the head and the proxies train), an anchor
never draws itself as a negative (HIER's code can), and no taxonomy is used: only the leaf label.

Randomness (triplet draws, proxy initialisation, and the seeds of each step's Gumbel noise streams) comes
from torch generators seeded from the job's seed and kept in the checkpoint, so a run is a function of its
seed and resumes bit-identically.

Cost: the term is computed block of triplets by block (``triplet_ancestor_loss``), with its gradient taken
in the same pass, so no (triplets x proxies) tensor is held. The Gumbel noise is kept as its exponentials e
(g = -log e), and each choice is computed as an exponential race, exp(-far / tau) / e, whose row argmax is
the Gumbel-max choice and whose row-normalised values are the Gumbel-softmax: one exp and one log per
(triplet, proxy, choice) instead of two logs and an exp. What remains is one Gumbel draw per (triplet,
proxy, choice), the method's own cost (benchmarks/hier_cost.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from hierconsole.config.preset import HierConfig, TrainingConfig
from hierconsole.engine.determinism import derive_seed
from hierconsole.engine.geometry import TRAIN_CLIP, Poincare, norm_bound

CLIP_NORM_EPS = 1e-5
"""Added to the feature norm before clipping to ``clip_r`` (HIER's ToPoincare)."""


class _ConformalGradient(torch.autograd.Function):
    """Identity forward; backward scales the gradient by (1 - c|x|^2)^2 / 4 (hyptorch's RiemannianGradient)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, c: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.c = c
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        scale = (1.0 - ctx.c * x.pow(2).sum(-1, keepdim=True)).pow(2) / 4.0
        return grad * scale, None


def conformal_gradient(x: Tensor, c: float) -> Tensor:
    return _ConformalGradient.apply(x, c)


class HierBall(Poincare):
    """HIER's head and ranking geometry: clip to ``clip_r``, expmap0 at curvature ``c``, project; distances
    are the Poincaré ball's. Holds no trainable state, like every geometry head."""

    def __init__(self, c: float, clip_r: float):
        super().__init__(c=c)
        self.clip_r = float(clip_r)

    def extra_repr(self) -> str:
        return f"c={self.c}, clip_r={self.clip_r}"

    @property
    def bound(self) -> float:
        """Largest norm an embedding can reach: tanh(sqrt(c) clip_r) / sqrt(c)."""
        return norm_bound(self.c, self.clip_r)

    def embed(self, t: Tensor) -> Tensor:
        n = t.norm(p=2, dim=-1, keepdim=True) + CLIP_NORM_EPS
        t = t * torch.clamp(self.clip_r / n, max=1.0)
        x = self.ball.projx(self.ball.expmap0(t))
        return conformal_gradient(x, self.c) if x.requires_grad else x


def hier_ball(config: HierConfig) -> HierBall:
    return HierBall(config.c, config.clip_r)


# -- the two losses, as pure functions of their inputs (tested against loops in tests/engine/test_hier_style.py)


def proxy_anchor_loss(z: Tensor, leaf: Tensor, proxies: Tensor, alpha: float, margin: float) -> Tensor:
    """Proxy-Anchor on cosine similarity: for proxies with a positive in the batch, the mean of
    log(1 + sum_pos e^{-alpha (cos - delta)}); plus, over all proxies, the mean of
    log(1 + sum_neg e^{alpha (cos + delta)})."""
    cos = F.normalize(z, dim=-1) @ F.normalize(proxies, dim=-1).T  # [B, C]
    pos = F.one_hot(leaf, num_classes=proxies.shape[0]).to(torch.bool)
    pos_sum = torch.where(pos, torch.exp(-alpha * (cos - margin)), 0.0).sum(dim=0)
    neg_sum = torch.where(~pos, torch.exp(alpha * (cos + margin)), 0.0).sum(dim=0)
    with_pos = pos.any(dim=0)
    pos_term = torch.log1p(pos_sum[with_pos]).sum() / with_pos.sum().clamp_min(1)
    neg_term = torch.log1p(neg_sum).sum() / proxies.shape[0]
    return pos_term + neg_term


UNIFORM_OFFSET = 1.0 - 2.0**-24
"""Subtracted from a float32 in [1, 2) built from 23 random mantissa bits, giving u = (2m + 1) 2^-24: the
2^23 midpoints of [0, 1), exact in float32 and never 0 or 1, so log(u) is finite and strictly negative."""


class GumbelStream:
    """Standard Gumbel noise for the two ancestor choices, drawn block of rows by block of rows, held as its
    exponentials: the Gumbel draw g is -log(e) with e = -log(u) ~ Exp(1).

    Each choice has its own numpy PCG64 bit stream (seeded from the objective's torch generator, so the
    checkpointed torch state still determines every draw). Each 32 bits of it become one u: 23 of them as the
    mantissa of a float32 in [1, 2), minus ``UNIFORM_OFFSET``. The loss needs e only through exp(g) = 1/e, so
    a draw costs 32 raw bits, three integer/float passes and one vectorised log; numpy's float32 uniforms
    and its libm logs were several times that (the noise was most of the HIER term's cost). Two streams, not
    one interleaved, and an odd leftover 32 bits carried to the next block, so a block-by-block draw is the
    same numbers as one whole draw, whatever the blocks."""

    def __init__(self, seeds: tuple[int, int], p: int):
        self.p = p
        self._bits = [np.random.PCG64(s) for s in seeds]
        self._carry: list[np.ndarray] = [np.empty(0, np.uint32), np.empty(0, np.uint32)]

    def log_uniforms(self, rows: int) -> tuple[Tensor, Tensor]:
        """The next ``rows`` x p values of log(u) = -e of each choice, float32 CPU tensors (all < 0)."""
        n = rows * self.p
        out = []
        for c, bits in enumerate(self._bits):
            carry = self._carry[c]
            raw = bits.random_raw((n - carry.size + 1) // 2).view(np.uint32)
            if carry.size:
                raw = np.concatenate([carry, raw])
            self._carry[c] = raw[n:].copy()
            x = torch.from_numpy(raw[:n].view(np.int32)).view(rows, self.p)
            f = x.bitwise_and_(0x007FFFFF).bitwise_or_(0x3F800000).view(torch.float32)
            out.append(f.sub_(UNIFORM_OFFSET).log_())
        return out[0], out[1]

    def next(self, rows: int) -> tuple[Tensor, Tensor]:
        """The next ``rows`` x p exponentials e of each choice (the Gumbel noise is -log(e))."""
        a, b = self.log_uniforms(rows)
        return a.neg_(), b.neg_()


def noise_seeds(generator: torch.Generator) -> tuple[int, int]:
    """Two 63-bit seeds for a ``GumbelStream``, drawn from ``generator``."""
    a, b = torch.randint(0, 2**63 - 1, (2,), generator=generator, dtype=torch.int64).tolist()
    return int(a), int(b)


ROW_BLOCK_ELEMENTS = 1 << 16
"""Triplet rows are processed in blocks of about this many (row, proxy) elements, so every [rows, P]
intermediate stays in cache and nothing of size (triplets x proxies) is ever held."""


def _row_argmin(x: Tensor) -> Tensor:
    """Column of each row's smallest entry (the first on a tie), [rows, 1]. On the CPU through numpy, whose
    row argmin is several times torch's there."""
    if x.device.type != "cpu":
        return x.argmin(dim=1, keepdim=True)
    return torch.from_numpy(np.argmin(x.numpy(), axis=1).astype(np.int64)).unsqueeze(1)


def _sign_diff(x: Tensor, y: Tensor) -> Tensor:
    """sign(x - y): with h = d/2, the gradient h (1 + t) goes to x and h (1 - t) to y, which is torch.maximum's
    rule (all to the larger, half each on a tie). Arithmetic, because torch's CPU comparisons and ``where``
    cost several times its arithmetic."""
    return torch.sign(x - y)


def _race(far: Tensor, log_u: Tensor, tau: float) -> Tensor:
    """exp((min(far) - far) / tau) / log(u) per row, [rows, P], all <= 0: minus the softmax's unnormalised
    weights exp(-far / tau + g) (g = -log(-log u)) up to a positive factor per row, so its row argmin is the
    Gumbel-max argmax and its row-normalised values are the Gumbel-softmax. One exp and no log per element
    (the noise's second log cancels against the softmax's exp); the row's minimum is subtracted so the
    largest exp is 1 and nothing that matters underflows."""
    shift = torch.amin(far, dim=1, keepdim=True).mul_(1.0 / tau)
    return torch.add(shift, far, alpha=-1.0 / tau).exp_().div_(log_u)


def _ancestor_block(
    dist: Tensor,
    i: Tensor,
    j: Tensor,
    k: Tensor,
    log_u1: Tensor,
    log_u2: Tensor,
    tau: float,
    margin: float,
    grad: Tensor | None,
) -> Tensor:
    """Sum of the HIER term over one block of triplets; adds the block's d(sum)/d(dist) into ``grad``.

    The forward pass needs only the two argmaxes: the straight-through one-hot is exactly 1 at the argmax
    and 0 elsewhere, so y . d = d[argmax], and the softmax is only the race's weights normalised."""
    di, dj, dk = dist.index_select(0, i), dist.index_select(0, j), dist.index_select(0, k)
    far1 = torch.maximum(di, dj)
    w1 = _race(far1, log_u1, tau)
    a = _row_argmin(w1)
    far2 = torch.maximum(dk, far1)
    w2 = _race(far2, log_u2, tau)
    b = _row_argmin(w2)
    at_a = torch.cat([di.gather(1, a), dj.gather(1, a), dk.gather(1, a)], dim=1)
    at_b = torch.cat([di.gather(1, b), dj.gather(1, b), dk.gather(1, b)], dim=1)
    sign = torch.tensor([1.0, 1.0, -1.0], dtype=dist.dtype, device=dist.device)
    hinge = ((at_a - at_b) * sign).add_(margin)
    active = (hinge > 0) & (a != b)  # [rows, 3]: the i, j and k hinges that count
    total = torch.where(active, hinge, 0.0).sum()
    if grad is None or not active.any():
        return total
    # Most triplets are active (about 90 % at the paper's defaults), so the gradient is taken over the whole
    # block with r = 0 on the rest rather than on a gathered subset.
    r = active.to(dist.dtype) * sign  # [rows, 3]: +-1 where a hinge counts
    # d(sum)/d(y1) = r_i di + r_j dj + r_k dk (r_k carries the k hinge's sign) and d(sum)/d(y2) = -that.
    # Through y = hard - soft.detach() + soft the gradient reaches the logits as s (G - <s, G>), and the
    # distances through -far / tau (folded into q = -G / tau) and the two maxima.
    # Everything below is half the gradient (h = d/2, the 1/2 folded into q) until the two maxima split it.
    q = di * (r[:, :1] * (-0.5 / tau))
    q.addcmul_(dj, r[:, 1:2], value=-0.5 / tau).addcmul_(dk, r[:, 2:], value=-0.5 / tau)
    s1 = w1.div_(w1.sum(dim=1, keepdim=True))
    h1 = q - torch.linalg.vecdot(s1, q, dim=1).unsqueeze(1)
    h1.mul_(s1)
    s2 = w2.div_(w2.sum(dim=1, keepdim=True))
    h2 = torch.linalg.vecdot(s2, q, dim=1).unsqueeze(1) - q
    h2.mul_(s2)
    # far2 = max(dk, far1): dk gets h2 (1 + t2), far1 h2 (1 - t2), i.e. half of it added to h1.
    t2 = _sign_diff(dk, far1)
    d_dk = torch.addcmul(h2, h2, t2)
    h1.add_(h2, alpha=0.5).addcmul_(h2, t2, value=-0.5)
    # far1 = max(di, dj)
    t1 = _sign_diff(di, dj)
    d_di = torch.addcmul(h1, h1, t1)
    d_dj = torch.addcmul(h1, h1, t1, value=-1.0)
    # The straight-through one-hots' own values: +-1 at the two ancestors.
    for d, col in ((d_di, 0), (d_dj, 1), (d_dk, 2)):
        w = r[:, col : col + 1]
        d.scatter_add_(1, a, w).scatter_add_(1, b, -w)
    grad.index_add_(0, i, d_di)
    grad.index_add_(0, j, d_dj)
    grad.index_add_(0, k, d_dk)
    return total


class _AncestorTerm(torch.autograd.Function):
    """The HIER term as one autograd node: the forward pass walks the triplets block by block and keeps only
    d(loss)/d(dist) [N, P]; the backward pass scales it. Nothing of size (triplets x proxies) outlives a block."""

    @staticmethod
    def forward(ctx: Any, dist: Tensor, i: Tensor, j: Tensor, k: Tensor, noise: GumbelStream, tau: float, margin: float) -> Tensor:
        d = dist.detach()
        n = i.numel()
        grad = torch.zeros_like(d) if ctx.needs_input_grad[0] else None
        block = max(1, ROW_BLOCK_ELEMENTS // max(1, d.shape[1]))
        sums = []
        for start in range(0, n, block):
            stop = min(n, start + block)
            u1, u2 = noise.log_uniforms(stop - start)
            u1, u2 = u1.to(d.device, d.dtype), u2.to(d.device, d.dtype)
            sums.append(_ancestor_block(d, i[start:stop], j[start:stop], k[start:stop], u1, u2, tau, margin, grad))
        if grad is not None:
            ctx.save_for_backward(grad.div_(n))
        return torch.stack(sums).sum() / n

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        (grad,) = ctx.saved_tensors
        return grad * grad_out, None, None, None, None, None, None


def triplet_ancestor_loss(
    dist: Tensor,
    triplets: tuple[Tensor, Tensor, Tensor],
    noise: GumbelStream,
    tau: float,
    margin: float,
) -> Tensor:
    """HIER's term on triplets (i, j, k) given their distances to the proxies (``dist`` [N, P]) and the
    Gumbel noise of the two ancestor choices (drawn from ``noise``, ``len(i)`` rows of each); the mean over
    the T triplets (0 when none).

    For each triplet the ancestor of (i, j) is the argmax over proxies of -max(d_i, d_j) / tau + g1 and that
    of (i, j, k) of -max(d_i, d_j, d_k) / tau + g2, one-hot with the softmax's gradient (straight-through);
    where they differ the term is relu(d_i[ij] - d_i[ijk] + m) + relu(d_j[ij] - d_j[ijk] + m) +
    relu(d_k[ijk] - d_k[ij] + m). The argmax is taken on the logits, the softmax only where a gradient flows."""
    i, j, k = triplets
    if i.numel() == 0:
        return dist.sum() * 0.0
    return _AncestorTerm.apply(dist, i, j, k, noise, tau, margin)


def _kth_true(mask: Tensor, rank: Tensor) -> Tensor:
    """Column of the (rank+1)-th True of each row of ``mask`` [A, N], for ranks [A, M]."""
    counts = mask.to(torch.int64).cumsum(dim=-1)
    return torch.searchsorted(counts, rank + 1)


def reciprocal_triplets(
    sim: Tensor, topk: int, per_anchor: int, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """(anchor, positive, negative) indices drawn from a similarity matrix [N, N].

    j is a positive of i when each is among the other's ``topk`` most similar (self included in the
    ranking); every other j != i is a negative. Anchors need at least two positives and one negative.
    Each anchor draws ``per_anchor`` positives, then each anchor ``per_anchor`` negatives, uniformly with
    replacement: rank floor(u * count) in ascending index order, u from ``generator`` (float64, [A, per_anchor],
    positives first)."""
    n = sim.shape[0]
    top = sim.topk(min(topk, n), dim=1).indices
    near = torch.zeros((n, n), dtype=torch.int8, device=sim.device).scatter_(1, top, 1)
    eye = torch.eye(n, dtype=torch.bool, device=sim.device)
    pos = ((near & near.T) == 1) & ~eye
    neg = ~pos & ~eye
    n_pos, n_neg = pos.sum(dim=1), neg.sum(dim=1)
    anchors = torch.nonzero((n_pos > 1) & (n_neg > 0)).squeeze(1)
    a = anchors.numel()
    u_pos = torch.rand((a, per_anchor), generator=generator, dtype=torch.float64)
    u_neg = torch.rand((a, per_anchor), generator=generator, dtype=torch.float64)
    if a == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=sim.device)
        return empty, empty, empty
    rank_pos = (u_pos.to(sim.device) * n_pos[anchors, None].to(torch.float64)).floor().to(torch.int64)
    rank_neg = (u_neg.to(sim.device) * n_neg[anchors, None].to(torch.float64)).floor().to(torch.int64)
    positive = _kth_true(pos[anchors], rank_pos)
    negative = _kth_true(neg[anchors], rank_neg)
    return anchors.repeat_interleave(per_anchor), positive.reshape(-1), negative.reshape(-1)


class HierObjective(nn.Module):
    """The loss of the HIER-style cell with its learnable state: class proxies and hyperbolic proxies.

    ``forward(z, leaf)`` takes the head's ball points [B, D] and leaf labels [B]."""

    def __init__(self, config: HierConfig, n_classes: int, dim: int, seed: int, ball: HierBall):
        super().__init__()
        self.config = config
        self.ball = ball
        init = torch.Generator(device="cpu")
        init.manual_seed(derive_seed(seed, "hier", "proxies"))
        # Proxy-Anchor's init: kaiming normal with fan_out = n_classes, i.e. std sqrt(2 / n_classes).
        self.class_proxies = nn.Parameter(
            torch.randn((n_classes, dim), generator=init, dtype=torch.float64).mul_(math.sqrt(2.0 / n_classes)).float()
        )
        # HIER's init: N(0, 1) / sqrt(dim) * 0.9 clip_r, as tangent vectors at the origin.
        self.hyperbolic_proxies = nn.Parameter(
            torch.randn((config.proxies, dim), generator=init, dtype=torch.float64)
            .mul_(0.9 * config.clip_r / math.sqrt(dim))
            .float()
        )
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(derive_seed(seed, "hier", "sampling"))

    def forward(self, z: Tensor, leaf: Tensor) -> Tensor:
        c = self.config
        loss = c.anchor_weight * proxy_anchor_loss(z, leaf, self.class_proxies, c.anchor_alpha, c.anchor_margin)
        if c.hier_weight == 0:
            return loss
        b = z.shape[0]
        lcas = self.ball.embed(self.hyperbolic_proxies)
        dist = self.ball.pairwise(torch.cat([z, lcas]), clip_max=TRAIN_CLIP)
        sim = torch.exp(-dist[:b, :b]).detach()
        sim = sim + (leaf.unsqueeze(0) == leaf.unsqueeze(1)).to(sim.dtype)
        term = self._term(dist[:b, b:], sim)
        term = term + self._term(dist[b:, b:], torch.exp(-dist[b:, b:]).detach())
        return loss + c.hier_weight * term

    def _term(self, dist: Tensor, sim: Tensor) -> Tensor:
        c = self.config
        triplets = reciprocal_triplets(sim, c.topk, c.triplets_per_anchor, self.generator)
        noise = GumbelStream(noise_seeds(self.generator), dist.shape[1])
        return triplet_ancestor_loss(dist, triplets, noise, c.tau, c.margin)

    @torch.no_grad()
    def clip_gradients_(self) -> None:
        for p in self.parameters():
            if p.grad is not None:
                p.grad.clamp_(-self.config.grad_value_clip, self.config.grad_value_clip)

    def checkpoint_state(self) -> dict[str, Any]:
        return {"proxies": self.state_dict(), "generator": self.generator.get_state()}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self.load_state_dict(state["proxies"])
        self.generator.set_state(state["generator"])


def hier_optimizer(
    projector: nn.Module, objective: HierObjective, training: TrainingConfig
) -> torch.optim.AdamW:
    """AdamW over the projector (the study's learning rate, like every cell) and the two kinds of proxies
    (their own learning rates). ``lr_scale`` keeps each group's ratio under the study's schedule."""
    c = objective.config
    scales = (1.0, c.proxy_lr / training.lr, c.hproxy_lr / training.lr)
    params = (
        [p for p in projector.parameters() if p.requires_grad],
        [objective.class_proxies],
        [objective.hyperbolic_proxies],
    )
    groups: list[dict[str, Any]] = [
        {"params": ps, "lr_scale": scale, "lr": training.lr * scale} for ps, scale in zip(params, scales, strict=True)
    ]
    return torch.optim.AdamW(groups, lr=training.lr, weight_decay=training.weight_decay)
