"""Optimisers: the preset's `training.optimizer` and `training.lr_schedule` by name, and the pieces for
cells stacked on a leading axis (per-cell gradient clipping, fused AdamW)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import torch
from torch import Tensor

from hierconsole.config.preset import TrainingConfig

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
        self.group: dict[str, Any] = {  # an Optimizer param group: values of several types
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
            # step follows backward, so every grad is set (the kernel rejects a None one anyway)
            cast(list[Tensor], [p.grad for p in self.params]),
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


class Stepper(Protocol):
    """What the trainer needs of an optimiser: torch's Optimizer and FusedAdamW both are one."""

    def zero_grad(self, set_to_none: bool = True) -> None: ...
    def step(self) -> Any: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


def _adamw(params: Sequence[Tensor], training: TrainingConfig, stacked: bool) -> Stepper:
    # The stacked engine calls AdamW's fused kernel itself where it exists (see FusedAdamW); both paths
    # are AdamW with decoupled weight decay and torch's default betas and eps.
    device = params[0].device
    if stacked and device.type in ("cpu", "cuda"):
        return FusedAdamW(params, lr=training.lr, weight_decay=training.weight_decay)
    return torch.optim.AdamW(params, lr=training.lr, weight_decay=training.weight_decay)


OPTIMIZERS: dict[str, Callable[[Sequence[Tensor], TrainingConfig, bool], Stepper]] = {"adamw": _adamw}
"""`training.optimizer` -> factory(params, training, stacked)."""

LR_SCHEDULES: dict[str, Callable[[float, int, int], float]] = {"constant": lambda lr, epoch, epochs: lr}
"""`training.lr_schedule` -> lr(base lr, epoch (1-based), epochs)."""


def make_optimizer(params: Sequence[Tensor], training: TrainingConfig, *, stacked: bool) -> Stepper:
    """The preset's optimiser over `params` (stacked: the cells' parameters share a leading cell axis)."""
    return OPTIMIZERS[training.optimizer](list(params), training, stacked)


def learning_rate(training: TrainingConfig, epoch: int, epochs: int) -> float:
    """The learning rate of `epoch` under the preset's schedule."""
    return LR_SCHEDULES[training.lr_schedule](training.lr, epoch, epochs)


def set_learning_rate(optimizer: Stepper, lr: float) -> None:
    if isinstance(optimizer, FusedAdamW):
        optimizer.group["lr"] = lr
        return
    assert isinstance(optimizer, torch.optim.Optimizer)
    for group in optimizer.param_groups:
        # A group may run at a fixed ratio to the schedule (the HIER-style cell's proxies).
        group["lr"] = lr * group.get("lr_scale", 1.0)
