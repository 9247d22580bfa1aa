"""The HIER-style arm under the authors' recipe (``baselines.hier.recipe = "authors"``): their class-balanced
sampler, their embedding head and their optimiser, written anew from the method and the defaults of the
authors' public code (hier/sampler.py's UniqueClassSampler, hier/models/model.py's last layer,
hier/utils.py's parameter groups and clip_gradients_value, scripts/DINO/hier_CUB.sh).

The loss is the same under both recipes (engine.hier_style). What differs from their run, forced by this
study: the backbone stays frozen (so their one-epoch backbone warm-up has nothing to hold), training is in
float32 rather than fp16 autocast (their AdamW eps of 1e-4, set for fp16, is kept as their setting), and the
sampler's draws come from a generator seeded by (training seed, epoch) instead of (batch, epoch) plus the
global NumPy state, so an epoch's batches are a function of the seed alone and a resumed run draws the
same ones without any sampler state in its checkpoint.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from hierconsole.config.preset import HierConfig
from hierconsole.engine.determinism import derive_seed
from hierconsole.engine.geometry import Geometry
from hierconsole.engine.projector import Projector


def balanced_batches(leaf: np.ndarray, batch_size: int, per_class: int, seed: int, epoch: int) -> np.ndarray:
    """One epoch of class-balanced batches, as positions into ``leaf`` (the training rows' leaf labels):
    [len(leaf) // batch_size, batch_size] int64.

    Each batch draws batch_size / per_class distinct classes uniformly among those present (with replacement
    only when there are fewer classes than that), then per_class of each class's rows uniformly with
    replacement (a class may have fewer rows than per_class); rows are grouped class by class, as the
    authors' UniqueClassSampler yields them. Every draw comes from a PCG64 stream seeded by (seed, epoch)."""
    if batch_size % per_class:
        raise ValueError(f"batch size {batch_size} is not a multiple of {per_class} images per class")
    leaf = np.asarray(leaf, dtype=np.int64)
    n_batches = len(leaf) // batch_size
    if n_batches == 0:
        raise ValueError(f"{len(leaf)} training samples cannot fill one class-balanced batch of {batch_size}")
    by_class = np.argsort(leaf, kind="stable")
    classes, starts, sizes = np.unique(leaf[by_class], return_index=True, return_counts=True)
    k = batch_size // per_class
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, "hier", "balanced-sampler", epoch)))
    out = np.empty((n_batches, batch_size), dtype=np.int64)
    for b in range(n_batches):
        chosen = rng.choice(len(classes), size=k, replace=k > len(classes))
        pick = np.floor(rng.random((k, per_class)) * sizes[chosen, None]).astype(np.int64)
        out[b] = by_class[starts[chosen, None] + pick].reshape(-1)
    return out


class AuthorsHead(Projector):
    """HIER's last layer on frozen features: LayerNorm (no affine) -> Linear(in_dim -> out_dim) -> their ball.

    A Projector to everything that embeds, ranks, checkpoints or reloads a model (``raw``, ``forward`` and
    ``geometry`` are what those read); only its layers are the authors'. The linear weight starts orthogonal
    (gain 1) from ``generator``, the bias at 0, as their ``_init_weights``."""

    def __init__(self, in_dim: int, geometry: Geometry, *, out_dim: int, generator: torch.Generator | None = None):
        nn.Module.__init__(self)  # not Projector's layers: the head holds only these two
        self.norm = nn.LayerNorm(in_dim, elementwise_affine=False)
        self.fc = nn.Linear(in_dim, out_dim)
        with torch.no_grad():
            nn.init.orthogonal_(self.fc.weight, gain=1.0, generator=generator)
            self.fc.bias.zero_()
        self.geometry = geometry

    def raw(self, f: Tensor) -> Tensor:
        return self.fc(self.norm(f))


def authors_head(in_dim: int, geometry: Geometry, hier: HierConfig, seed: int) -> AuthorsHead:
    """The head of training seed ``seed``, its initial weights drawn from a generator of its own."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(seed, "hier", "head"))
    return AuthorsHead(in_dim, geometry, out_dim=hier.embedding, generator=gen)


def authors_optimizer(head: nn.Module, objective: nn.Module, hier: HierConfig) -> torch.optim.AdamW:
    """AdamW over their three parameter groups: the head at ``lr``, the hyperbolic proxies at ``hproxy_lr``
    (their 50 x lr) and the Proxy-Anchor proxies at ``proxy_lr`` (their 1e4 x lr); weight decay and eps as
    theirs on every group. The learning rates stay constant (their schedule without decay)."""
    groups = [
        {"params": [p for p in head.parameters() if p.requires_grad], "lr": hier.lr},
        {"params": [objective.hyperbolic_proxies], "lr": hier.hproxy_lr},
        {"params": [objective.class_proxies], "lr": hier.proxy_lr},
    ]
    return torch.optim.AdamW(groups, lr=hier.lr, weight_decay=hier.weight_decay, eps=hier.adam_eps)


@torch.no_grad()
def clamp_gradients_(modules: tuple[nn.Module, ...], value: float) -> None:
    """Their clip_gradients_value: every gradient of the head and of the losses clamped to [-value, value]."""
    for module in modules:
        for p in module.parameters():
            if p.grad is not None:
                p.grad.clamp_(-value, value)
