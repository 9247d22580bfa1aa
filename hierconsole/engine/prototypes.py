"""The parameters an objective owns: a learnt prototype per leaf for each cell whose objective asks for
them (``prototypes = True``, `registry`), e.g. soft-label cross-entropy's classifier over leaves.

They are kept apart from the projector so that the projectors of every cell stay the same size (the
parameter audit compares projectors) and what an objective adds is counted on its own (``Init``'s
``objective_params``). Both engines hold them the same way, as an [S, N, D] stack of S cells' raw
prototypes with one optimiser over the stack: the per-cell reference one stack a cell, the batched
engine one stack for all its prototype cells. Their update is AdamW's (elementwise, so a stack of S steps
each cell as it would alone) at the schedule's learning rate, and their gradient is clipped per cell to
the preset's norm on its own: a projector's clip does not depend on how many leaves the taxonomy has.

Every prototype cell of a seed starts from the same prototypes, drawn from (seed) alone, as every cell
starts from the same projector: the cells of a seed differ only in their geometry and objective.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from hierconsole.config.preset import TrainingConfig
from hierconsole.engine.determinism import derive_seed
from hierconsole.engine.geometry import Geometry
from hierconsole.engine.optim import FusedAdamW, Stepper, clip_per_cell_, make_optimizer


def owns_prototypes(objective: Any) -> bool:
    """Whether an objective (an instance or class of the protocol) asks for leaf prototypes."""
    return bool(getattr(objective, "prototypes", False))


def initial_prototypes(seed: int, n_leaves: int, dim: int) -> Tensor:
    """[N, D] float64 raw prototypes of seed ``seed``: standard normal / sqrt(D), so each has about unit
    norm before the geometry's map, drawn from a generator of their own (the global RNGs stay as they were)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(seed, "prototypes"))
    return torch.randn(n_leaves, dim, generator=gen, dtype=torch.float64) / math.sqrt(dim)


class PrototypeStack:
    """S cells' raw prototypes [S, N, D] and their optimiser; per-cell state in and out."""

    def __init__(
        self, n_cells: int, n_leaves: int, dim: int, training: TrainingConfig, device: torch.device, dtype: torch.dtype
    ):
        self.value = nn.Parameter(torch.zeros(n_cells, n_leaves, dim, device=device, dtype=dtype))
        self.optimizer: Stepper = make_optimizer([self.value], training, stacked=True)
        self.grad_clip = training.grad_clip

    def distances(self, geometry: Geometry, z: Tensor, rows: Tensor | slice, clip_max: float) -> Tensor:
        """[K, B, N] distances of embeddings ``z`` [K, B, D'] to the prototypes of stack rows ``rows``, in
        ``geometry`` (the prototypes mapped into it by its ``embed``)."""
        return geometry.pairwise(z, geometry.embed(self.value[rows]), clip_max=clip_max)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        """Clip each cell's prototype gradient to the preset's norm, then take the optimiser's step."""
        clip_per_cell_([self.value], self.grad_clip)
        self.optimizer.step()

    def state(self, i: int) -> dict[str, Any]:
        """Cell ``i``'s prototypes and optimiser moments (copies), the layout every engine reads back."""
        full = self.optimizer.state_dict()["state"].get(0, {})
        moments = {
            name: (v if name == "step" else v[i]).detach().clone() for name, v in full.items() if torch.is_tensor(v)
        }
        return {"value": self.value[i].detach().clone(), "optimizer": moments}

    @torch.no_grad()
    def load(self, rows: slice, states: Sequence[dict[str, Any]]) -> None:
        """Cells ``rows`` from per-cell states (as ``state`` writes them); bits are copied exactly. The
        cells share the optimiser's step count (they always step together), so the states must agree on it."""
        values = torch.stack([s["value"].to(self.value.device) for s in states])
        self.value[rows].copy_(values)
        moments = [s["optimizer"] for s in states]
        if not any(moments):
            return  # never stepped
        if not all(moments) or any(not torch.equal(moments[0]["step"], m["step"]) for m in moments[1:]):
            raise ValueError("prototype cells of a batched job must have taken the same number of steps")
        opt = self.optimizer
        if isinstance(opt, FusedAdamW):
            if opt.stepped and not torch.equal(opt.steps[0].cpu(), moments[0]["step"].cpu().to(opt.steps[0].dtype)):
                raise ValueError("stacked jobs must resume from the same step count")
            opt.steps[0].copy_(moments[0]["step"])
            opt.exp_avg[0][rows].copy_(torch.stack([m["exp_avg"] for m in moments]))
            opt.exp_avg_sq[0][rows].copy_(torch.stack([m["exp_avg_sq"] for m in moments]))
            opt.stepped = True
            return
        if rows != slice(0, self.value.shape[0]):
            raise ValueError("a part of a prototype stack is restored only with the stacked AdamW (CPU or CUDA)")
        state = {name: moments[0]["step"].clone() if name == "step" else torch.stack([m[name] for m in moments])
                 for name in moments[0]}  # fmt: skip
        opt.load_state_dict({"state": {0: state}, "param_groups": opt.state_dict()["param_groups"]})
