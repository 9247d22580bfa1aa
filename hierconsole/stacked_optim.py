"""Optimiser pieces for cells stacked on a leading axis: per-cell gradient clipping and fused AdamW."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

CLIP_EPS = 1e-6
"""The denominator guard of torch.nn.utils.clip_grad_norm_, kept so per-cell clipping matches it."""


@torch.no_grad()
def clip_per_cell_(params: Sequence[Tensor], max_norm: float) -> Tensor:
    """Clip each cell's gradient (axis 0 of every stacked parameter) to ``max_norm``; return the [C] norms.

    The same arithmetic as ``clip_grad_norm_`` applied to each cell's parameters alone: the L2 norm of the
    per-tensor L2 norms, and a factor min(1, max_norm / (norm + 1e-6)).
    """
    grads = [p.grad for p in params if p.grad is not None]
    n_cells = grads[0].shape[0]
    per_tensor = torch.stack([torch.linalg.vector_norm(g.reshape(n_cells, -1), dim=1) for g in grads], dim=1)
    total = torch.linalg.vector_norm(per_tensor, dim=1)
    coef = (max_norm / (total + CLIP_EPS)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(n_cells, *([1] * (g.dim() - 1))))
    return total


class FusedAdamW:
    """torch.optim.AdamW(fused=True)'s update, calling its kernel directly; the same state_dict layout.

    Same kernel, same arguments, so the same bits (tested). What it leaves out is the Optimizer class:
    its first construction imports torch._dynamo (about 1.5 s in every worker process) and each step
    adds some 0.2 ms of Python, both noticeable at this model's size.
    """

    def __init__(self, params: Sequence[Tensor], lr: float, weight_decay: float):
        self.params = list(params)
        self.group = {
            "lr": lr,
            "betas": (0.9, 0.999),
            "eps": 1e-8,
            "weight_decay": weight_decay,
            "amsgrad": False,
            "maximize": False,
            "foreach": None,
            "capturable": False,
            "differentiable": False,
            "fused": True,
            "decoupled_weight_decay": True,
        }
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        self.stepped = False  # torch's state stays empty until the first step

    def zero_grad(self, set_to_none: bool = True) -> None:  # noqa: ARG002 - always to None
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        g = self.group
        torch._foreach_add_(self.steps, 1)
        torch._fused_adamw_(
            self.params,
            [p.grad for p in self.params],
            self.exp_avg,
            self.exp_avg_sq,
            [],
            self.steps,
            amsgrad=False,
            lr=g["lr"],
            beta1=g["betas"][0],
            beta2=g["betas"][1],
            weight_decay=g["weight_decay"],
            eps=g["eps"],
            maximize=False,
        )
        self.stepped = True

    def state_dict(self) -> dict[str, Any]:
        state = {}
        if self.stepped:
            for k in range(len(self.params)):
                state[k] = {
                    "step": self.steps[k],
                    "exp_avg": self.exp_avg[k],
                    "exp_avg_sq": self.exp_avg_sq[k],
                }
        return {"state": state, "param_groups": [{**self.group, "params": list(range(len(self.params)))}]}

    @torch.no_grad()
    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Moments and step counts from ``sd``; hyperparameters stay this optimiser's own."""
        for k, entry in sd["state"].items():
            p = self.params[int(k)]
            self.steps[int(k)].copy_(entry["step"])
            self.exp_avg[int(k)].copy_(entry["exp_avg"].to(device=p.device, dtype=p.dtype))
            self.exp_avg_sq[int(k)].copy_(entry["exp_avg_sq"].to(device=p.device, dtype=p.dtype))
        self.stepped = bool(sd["state"])
