"""The cells of one job as one computation: stacked projectors, grouped heads and losses, per-cell optimiser.

Every cell of a seed sees the same input batch, so the first layers of C projectors are one wide GEMM
[B, D] @ [D, C*H]; BatchNorm over C*H channels is C independent BatchNorm1d(H) (statistics are per
channel); the second layer is one ``baddbmm`` over a cell axis. Heads run once per geometry, losses once
per loss kind, each over a cell axis.

What must stay per cell, and how it does:
- dropout masks: each cell's mask is drawn with that cell's own generator state swapped into the default
  generator, by the same ``F.dropout`` call (same shape, dtype and device) as in the per-cell reference, so
  the masks are identical to the reference's on every device;
- gradient clipping: each cell's gradient norm is computed and clipped separately (one global norm over the
  stack would let the cell with the largest gradient shrink everybody else's step);
- AdamW: the update is elementwise (moments, bias correction and decoupled weight decay alike), so one
  optimiser over the stacked tensors is per-element the same as one optimiser per cell; the step count is
  shared, which is right because the cells always step together. (Bit for bit where each cell's block is
  a whole number of the kernel's vectors, as at 768-256-32; a scalar tail may differ in the last bit.)

The stacked state converts to and from per-cell ``Projector`` state dicts and per-cell optimiser state
dicts exactly (slicing and stacking copy bits), so checkpoints and final models look the same whichever
path trained them. The per-cell path in ``training`` stays the reference these are tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from hierconsole.config.preset import PoincareConfig, TrainingConfig
from hierconsole.contract.jobspec import CellSpec
from hierconsole.engine import fused
from hierconsole.engine.geometry import TRAIN_CLIP, Geometry, geometry_of
from hierconsole.engine.losses import leaf_only_weights, objective_of, regression_loss, taxonomy_supcon_loss
from hierconsole.engine.optim import FusedAdamW, Stepper, clip_per_cell_, make_optimizer
from hierconsole.engine.projector import Projector
from hierconsole.engine.prototypes import PrototypeStack, owns_prototypes
from hierconsole.registry import OBJECTIVES
from hierconsole.vocabulary import LOSSES, REGRESSION, SUPCON

FLAT_SUPCON = OBJECTIVES["flat_supcon"].name

__all__ = [
    "BatchedCells",
    "CellStack",
    "FusedAdamW",
    "GroupView",
    "StackedProjector",
    "cell_noise",
    "clip_per_cell_",
]

# Stacked name -> Projector state-dict key, in Projector.parameters() order (the per-cell optimiser's
# parameter indices 0..5 refer to this order).
PARAMS: tuple[tuple[str, str], ...] = (
    ("w1", "fc1.weight"),
    ("b1", "fc1.bias"),
    ("gamma", "bn.weight"),
    ("beta", "bn.bias"),
    ("w2", "fc2.weight"),
    ("b2", "fc2.bias"),
)
BUFFERS: tuple[tuple[str, str], ...] = (
    ("running_mean", "bn.running_mean"),
    ("running_var", "bn.running_var"),
    ("num_batches_tracked", "bn.num_batches_tracked"),
)
# Projector.state_dict() key order, so a converted state dict is indistinguishable from a real one.
STATE_ORDER: tuple[str, ...] = (
    "fc1.weight",
    "fc1.bias",
    "bn.weight",
    "bn.bias",
    "bn.running_mean",
    "bn.running_var",
    "bn.num_batches_tracked",
    "fc2.weight",
    "fc2.bias",
)


class StackedProjector(nn.Module):
    """C projectors Linear -> BatchNorm1d -> ReLU -> Dropout -> Linear with parameters stacked on axis 0."""

    # The buffers registered in __init__, declared as torch's BatchNorm does: Module.__getattr__ is loose.
    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(
        self,
        n_cells: int,
        in_dim: int,
        hidden: int,
        out_dim: int,
        *,
        bn_eps: float = 1e-5,
        bn_momentum: float = 0.1,
    ):
        super().__init__()
        c, h, o = n_cells, hidden, out_dim
        self.n_cells, self.in_dim, self.hidden, self.out_dim = c, in_dim, h, o
        self.bn_eps, self.bn_momentum = bn_eps, bn_momentum
        self.w1 = nn.Parameter(torch.zeros(c, h, in_dim))
        self.b1 = nn.Parameter(torch.zeros(c, h))
        self.gamma = nn.Parameter(torch.ones(c, h))
        self.beta = nn.Parameter(torch.zeros(c, h))
        self.w2 = nn.Parameter(torch.zeros(c, o, h))
        self.b2 = nn.Parameter(torch.zeros(c, o))
        self.register_buffer("running_mean", torch.zeros(c, h))
        self.register_buffer("running_var", torch.ones(c, h))
        self.register_buffer("num_batches_tracked", torch.zeros(c, dtype=torch.long))

    def hidden_layer(self, x: Tensor, cells: slice | None = None) -> Tensor:
        """[B, D] -> [B, K*H]: the first Linear, BatchNorm and ReLU (no dropout) of the K cells in ``cells``
        (a contiguous range; all by default)."""
        params = (_part(t, cells) for t in (self.w1, self.b1, self.gamma, self.beta))
        buffers = (_part(t, cells) for t in (self.running_mean, self.running_var, self.num_batches_tracked))
        return self._hidden(x, *params, *buffers)

    def _hidden(
        self,
        x: Tensor,
        w1: Tensor,
        b1: Tensor,
        gamma: Tensor,
        beta: Tensor,
        mean: Tensor,
        var: Tensor,
        tracked: Tensor,
    ) -> Tensor:
        kh = b1.numel()
        z = F.linear(x, w1.reshape(kh, self.in_dim), b1.reshape(kh))
        if self.training:
            tracked.add_(1)
        # The running-stat views share storage with the [C, H] buffers, so batch_norm updates them in place.
        z = F.batch_norm(
            z,
            mean.view(kh),
            var.view(kh),
            gamma.reshape(kh),
            beta.reshape(kh),
            training=self.training,
            momentum=self.bn_momentum,
            eps=self.bn_eps,
        )
        # In place: batch_norm's backward needs its input and statistics, not its output, and relu's
        # backward reads relu's result; one [B, K*H] buffer fewer per step.
        return F.relu(z, inplace=True)

    def grouped_hidden_layer(self, x: Tensor, groups: int) -> Tensor:
        """[G, B, D] -> [B, C*H]: each group's hidden layer from its own batch ``x[g]``.

        The parameters are split with ``unbind``, whose backward stacks the groups' gradients in one copy
        (slicing each group out would cost a zero-filled full-size gradient per group and their sum).
        """
        per = self.n_cells // groups
        params = [t.view(groups, per, *t.shape[1:]).unbind(0) for t in (self.w1, self.b1, self.gamma, self.beta)]
        parts = []
        for g in range(groups):
            sl = slice(g * per, (g + 1) * per)
            buffers = (t[sl] for t in (self.running_mean, self.running_var, self.num_batches_tracked))
            parts.append(self._hidden(x[g], *(p[g] for p in params), *buffers))
        return torch.cat(parts, dim=1)

    def output_layer(self, a: Tensor, cells: slice | None = None) -> Tensor:
        """[B, K*H] -> [K, B, O]: the second Linear of each cell in ``cells`` (all by default) on its own
        slice of the hidden layer."""
        w2, b2 = _part(self.w2, cells), _part(self.b2, cells)
        b = a.shape[0]
        per_cell = a.view(b, w2.shape[0], self.hidden).transpose(0, 1)  # [K, B, H]
        return _ContiguousGrad.apply(torch.baddbmm(b2.unsqueeze(1), per_cell, w2.transpose(1, 2)))

    def forward(self, x: Tensor, noise: Tensor | None = None, groups: int = 1) -> Tensor:
        """Raw outputs [C, B, O]; ``noise`` [C, B, H] is the dropout factor (0 or 1/(1-p)) of every cell.

        With ``groups`` > 1 the cells are that many equal groups (the seeds of a stacked study), each with
        its own input batch: ``x`` is [G, B, D] and group g's hidden layer is computed from ``x[g]`` alone,
        by the same calls at the same shapes as a stack of that group's cells only (so each cell's numbers
        do not depend on the other groups). The second layer runs over all cells at once.
        """
        a = self.hidden_layer(x) if groups == 1 else self.grouped_hidden_layer(x, groups)
        if noise is not None:
            # noise is cell-major (each cell's block drawn contiguous); the product keeps a's layout.
            b = a.shape[0]
            a = (a.view(b, self.n_cells, self.hidden) * noise.transpose(0, 1)).view(b, -1)
        return self.output_layer(a)

    # -- per-cell views -----------------------------------------------------------------------------
    def cell_state(self, i: int) -> dict[str, Tensor]:
        """Cell ``i`` as a Projector state dict (independent copies, same keys and order)."""
        by_key = {key: getattr(self, name)[i] for name, key in PARAMS + BUFFERS}
        return {key: by_key[key].detach().clone() for key in STATE_ORDER}

    @torch.no_grad()
    def load_cell_states(self, states: Sequence[dict[str, Tensor]]) -> None:
        """Stack per-cell Projector state dicts (cell i from ``states[i]``); bits are copied exactly."""
        if len(states) != self.n_cells:
            raise ValueError(f"{len(states)} cell states for {self.n_cells} stacked cells")
        for name, key in PARAMS + BUFFERS:
            target = getattr(self, name)
            target.copy_(torch.stack([s[key].to(device=target.device) for s in states]))


def _part(t: Tensor, cells: slice | None) -> Tensor:
    """The cells' rows of a stacked tensor; the tensor itself for all cells (no slice in the graph)."""
    return t if cells is None else t[cells]


class _ContiguousGrad(torch.autograd.Function):
    """Identity whose backward hands on a contiguous gradient.

    The gradient reaching the raw outputs has a layout that depends on how the heads sliced the cells
    (contiguous after a gather, transposed when one head took them all), and the bias gradient's
    reduction order follows that layout. A fixed layout keeps every cell's arithmetic independent of
    which other cells share the stack.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:  # noqa: ARG004
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:  # noqa: ARG004
        return grad.contiguous()


class _FusedLoss(torch.autograd.Function):
    """raw [C, B, O] -> losses [C], whose gradient BatchedCells.fused_losses computed with the values."""

    @staticmethod
    def forward(
        ctx: Any, raw: Tensor, cells: BatchedCells, labels: Tensor, host_labels: Tensor | None
    ) -> Tensor:
        loss, grad = cells.grouped_fused_losses(raw, labels, host_labels)
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        (grad,) = ctx.saved_tensors
        return grad * g.view(-1, 1, 1), None, None, None


def cell_noise(
    rngs: Sequence[Any], batch: int, hidden: int, p: float, dtype: torch.dtype, device: torch.device
) -> Tensor | None:
    """[C, B, H] dropout factors, cell i's block ``[i]`` drawn under ``rngs[i].active()``.

    Each block is the factor the reference's ``nn.Dropout`` multiplies a [B, H] input by, from the same
    draw: on CPU, ``bernoulli_(1 - p)`` then ``div_(1 - p)`` (what dropout does there), written straight
    into the block; elsewhere ``F.dropout`` of a ones tensor (the fused kernel's mask * scale on CUDA).
    Blocks are cell-major so that each draw fills a contiguous block: the CPU kernel draws element by
    element in the same order either way, a third faster into contiguous memory than into a column slice.
    """
    if p == 0.0:
        return None
    if p == 1.0:  # dropout's own special case: everything dropped, no draw
        return torch.zeros(len(rngs), batch, hidden, dtype=dtype, device=device)
    if device.type == "cpu":
        noise = torch.empty(len(rngs), batch, hidden, dtype=dtype, device=device)
        for block, rng in zip(noise, rngs, strict=True):
            with rng.active():
                block.bernoulli_(1.0 - p)
        return noise.div_(1.0 - p)
    ones = torch.ones(batch, hidden, dtype=dtype, device=device)
    blocks = []
    for rng in rngs:
        with rng.active():
            blocks.append(F.dropout(ones, p, training=True))
    return torch.stack(blocks)


class BatchedCells:
    """The cells of one job trained as one computation. ``specs`` order is the cell axis.

    ``groups`` > 1 stacks that many jobs with the same cells (the seeds of one study) in one computation:
    the cell axis is group-major (cell i of group g at g * len(specs) + i), every group has its own input
    batch and labels, and each group's numbers are those of a ``BatchedCells`` of its cells alone (see
    ``StackedProjector.forward``; tests/engine/test_stacked.py holds them bit for bit on CPU).
    """

    def __init__(
        self,
        specs: Sequence[CellSpec],
        in_dim: int,
        training: TrainingConfig,
        poincare: PoincareConfig,
        device: torch.device,
        dtype: torch.dtype = torch.float32,
        *,
        groups: int = 1,
        leaf_labels: Tensor | None = None,
    ):
        """``leaf_labels`` [N, K]: each leaf's labels at the trained levels, needed when an objective owns
        leaf prototypes (`engine.prototypes`)."""
        if groups < 1:
            raise ValueError(f"groups must be at least 1, not {groups}")
        self.groups = groups
        self.specs = tuple(specs)
        self.training = training
        self.poincare = poincare
        self.in_dim = in_dim
        self.device = device
        self.dtype = dtype
        c = len(self.specs)
        self.net = StackedProjector(groups * c, in_dim, training.hidden, training.out_dim).to(
            device=device, dtype=dtype
        )
        # One head per geometry: the cells of a geometry are embedded and compared together.
        self.heads: list[tuple[Geometry, list[int]]] = []
        for name in dict.fromkeys(s.geometry for s in self.specs):
            idx = [i for i, s in enumerate(self.specs) if s.geometry == name]
            self.heads.append((geometry_of(name, poincare).to(device), idx))
        self._head_index = [torch.tensor(idx, device=device) for _, idx in self.heads]
        # Closed-form heads and losses (fused) where they cover the geometry; autograd through the library
        # otherwise. Both give the same gradients; the closed form is several times cheaper per step.
        head_order = [i for _, idx in self.heads for i in idx]
        self._from_heads = _inverse(head_order, device)
        self._regression = [i for i, s in enumerate(self.specs) if s.loss == REGRESSION]
        self._supcon = [i for i, s in enumerate(self.specs) if s.loss == SUPCON]
        # Every other objective (flat SupCon, one's own) by its component, its cells given together.
        # Flat SupCon also has the closed form: Taxonomy-SupCon's with the leaf's weight alone.
        self._flat = [i for i, s in enumerate(self.specs) if s.loss == FLAT_SUPCON]
        self._flat_t = torch.tensor(self._flat, device=device)
        self._flat_taus = torch.tensor([self.specs[i].tau for i in self._flat], dtype=dtype, device=device)
        self._others: list[tuple[Any, list[int], Tensor, Tensor | None]] = []
        for name in dict.fromkeys(s.loss for s in self.specs if s.loss not in LOSSES):
            idx = [i for i, s in enumerate(self.specs) if s.loss == name]
            taus = [self.specs[i].tau for i in idx]
            tau = None if any(t is None for t in taus) else torch.tensor(taus, dtype=dtype, device=device)
            self._others.append((objective_of(name), idx, torch.tensor(idx, device=device), tau))
        # Leaf prototypes of the objectives that own them: row g * P + j of the stack is group g's j-th
        # prototype cell (`_prototype_row` maps a cell of a group to j).
        owners = [i for objective, idx, _, _ in self._others if owns_prototypes(objective) for i in idx]
        self._prototype_row = {i: j for j, i in enumerate(sorted(owners))}
        self.prototypes: PrototypeStack | None = None
        self.leaf_labels = leaf_labels
        # Per head: the positions of its prototype cells among its embeddings (None: all of them) and
        # their rows in a group's prototypes; then the order that puts the heads' rows back in cell order.
        self._prototype_heads: list[tuple[Tensor | None, Tensor]] = []
        by_heads: list[int] = []
        for _, idx in self.heads:
            mine = [k for k, i in enumerate(idx) if i in self._prototype_row]
            at = None if len(mine) == len(idx) else torch.tensor(mine, dtype=torch.long, device=device)
            self._prototype_heads.append((at, torch.tensor([self._prototype_row[idx[k]] for k in mine], dtype=torch.long, device=device)))
            by_heads += [self._prototype_row[idx[k]] for k in mine]
        self._from_prototype_heads = _inverse(by_heads, device)
        if owners:
            if leaf_labels is None:
                raise ValueError("an objective with leaf prototypes needs the leaves' labels (leaf_labels)")
            self.prototypes = PrototypeStack(
                groups * len(owners), leaf_labels.shape[0], training.out_dim, training, device, dtype
            )
        self.use_fused = all(fused.supported(g) for g, _ in self.heads) and all(
            self.specs[idx[0]].loss == FLAT_SUPCON for _, idx, _, _ in self._others
        )
        loss_order = self._regression + self._supcon + [i for _, idx, _, _ in self._others for i in idx]
        self._loss_order = _inverse(loss_order, device)
        self._regression_t = torch.tensor(self._regression, device=device)
        self._supcon_t = torch.tensor(self._supcon, device=device)
        self._taus = torch.tensor([self.specs[i].tau for i in self._supcon], dtype=dtype, device=device)
        self.params = [getattr(self.net, name) for name, _ in PARAMS]
        self.optimizer: Stepper = make_optimizer(self.params, training, stacked=True)
        if groups > 1 and not isinstance(self.optimizer, FusedAdamW):
            raise ValueError("stacked groups need the stacked AdamW (a CPU or CUDA device)")

    @property
    def n_cells(self) -> int:
        """Cells of one group (the heads and losses work group by group)."""
        return len(self.specs)

    @property
    def n_stacked(self) -> int:
        """Cells on the stacked axis: every group's."""
        return self.groups * len(self.specs)

    def group_cells(self, g: int) -> slice:
        c = len(self.specs)
        return slice(g * c, (g + 1) * c)

    def group_prototypes(self, g: int) -> slice:
        """Group ``g``'s rows of the prototype stack."""
        p = len(self._prototype_row)
        return slice(g * p, (g + 1) * p)

    @property
    def steppers(self) -> tuple[Stepper, ...]:
        """Every optimiser of the stack (the learning-rate schedule sets each): the projectors', and the
        leaf prototypes' when an objective owns them."""
        return (self.optimizer,) if self.prototypes is None else (self.optimizer, self.prototypes.optimizer)

    # -- training -----------------------------------------------------------------------------------
    def distances(
        self, raw: Tensor, clip_max: float = TRAIN_CLIP, embedded: list[Tensor] | None = None
    ) -> Tensor:
        """[C, B, B] within-batch distances of raw outputs [C, B, O], each cell under its own geometry.
        ``embedded``, if given, receives each head's embeddings (for the leaf prototypes' distances)."""
        parts = []
        for geometry, idx in self.heads:
            z = geometry.embed(raw if len(idx) == self.n_cells else raw[idx])
            if embedded is not None:
                embedded.append(z)
            parts.append(geometry.pairwise(z, z, clip_max=clip_max))
        d = parts[0] if len(parts) == 1 else torch.cat(parts)
        return d if self._from_heads is None else d.index_select(0, self._from_heads)

    def prototype_distances(self, embedded: Sequence[Tensor], group: int) -> Tensor:
        """[P, B, N] distances of one group's prototype cells (in cell order) to their leaf prototypes, each
        in its own geometry, from the heads' embeddings ``embedded`` (``distances`` gives them)."""
        assert self.prototypes is not None
        first = group * len(self._prototype_row)
        parts = [
            self.prototypes.distances(geometry, z if at is None else z.index_select(0, at), rows + first, TRAIN_CLIP)
            for (geometry, _), z, (at, rows) in zip(self.heads, embedded, self._prototype_heads, strict=True)
            if rows.numel()
        ]
        d = parts[0] if len(parts) == 1 else torch.cat(parts)
        return d if self._from_prototype_heads is None else d.index_select(0, self._from_prototype_heads)

    def losses(
        self, dist: Tensor, labels: Tensor, embedded: Sequence[Tensor] | None = None, group: int = 0
    ) -> Tensor:
        """[C] loss of each cell from its [B, B] distances (and, for objectives with leaf prototypes, from
        the heads' embeddings ``embedded`` of group ``group``, as ``distances`` gives them)."""
        training = self.training
        parts = []
        to_leaves = None
        if self.prototypes is not None:
            assert embedded is not None, "objectives with leaf prototypes need the heads' embeddings"
            to_leaves = self.prototype_distances(embedded, group)
        if self._regression:
            d = dist if len(self._regression) == self.n_cells else dist.index_select(0, self._regression_t)
            parts.append(regression_loss(d, labels, targets=training.regression_targets))
        if self._supcon:
            d = dist if len(self._supcon) == self.n_cells else dist.index_select(0, self._supcon_t)
            parts.append(taxonomy_supcon_loss(d, labels, self._taus, weights=training.level_weights))
        for objective, idx, idx_t, tau in self._others:
            d = dist if len(idx) == self.n_cells else dist.index_select(0, idx_t)
            own = {}
            if owns_prototypes(objective):
                assert to_leaves is not None
                rows = [self._prototype_row[i] for i in idx]
                mine = to_leaves if len(rows) == len(self._prototype_row) else to_leaves[rows]
                own = {"prototype_dist": mine, "leaf_labels": self.leaf_labels}
            parts.append(objective.loss(d, labels, tau=tau, training=training, **own))
        loss = parts[0] if len(parts) == 1 else torch.cat(parts)
        return loss if self._loss_order is None else loss.index_select(0, self._loss_order)

    def fused_losses(
        self, raw: Tensor, labels: Tensor, host_labels: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """[C] losses of raw outputs [C, B, O] and their gradient [C, B, O], in closed form (fused)."""
        training = self.training
        tg = fused.BatchTargets.build(
            labels,
            raw.dtype,
            targets=training.regression_targets if self._regression else None,
            level_weights=training.level_weights if self._supcon else None,
            host_labels=host_labels,
        )
        c, b = raw.shape[0], raw.shape[1]
        dist = raw.new_empty(c, b, b)
        backs = []
        for (geometry, idx), idx_t in zip(self.heads, self._head_index, strict=True):
            t = raw if len(idx) == c else raw.index_select(0, idx_t)
            d, back = fused.embed_and_distances(geometry, t, TRAIN_CLIP, tg.offdiag)
            dist.index_copy_(0, idx_t, d)
            backs.append((idx_t, back))
        loss = raw.new_empty(c)
        grad_d = raw.new_empty(c, b, b)
        if self._regression:
            value, g = fused.regression_value_grad(dist.index_select(0, self._regression_t), tg)
            loss.index_copy_(0, self._regression_t, value)
            grad_d.index_copy_(0, self._regression_t, g)
        if self._supcon:
            value, g = fused.supcon_value_grad(dist.index_select(0, self._supcon_t), self._taus, tg)
            loss.index_copy_(0, self._supcon_t, value)
            grad_d.index_copy_(0, self._supcon_t, g)
        if self._flat:
            flat = fused.BatchTargets.build(
                labels, raw.dtype, targets=None, level_weights=leaf_only_weights(labels.shape[1]), host_labels=host_labels
            )
            value, g = fused.supcon_value_grad(dist.index_select(0, self._flat_t), self._flat_taus, flat)
            loss.index_copy_(0, self._flat_t, value)
            grad_d.index_copy_(0, self._flat_t, g)
        grad = raw.new_empty(raw.shape)
        for idx_t, back in backs:
            grad.index_copy_(0, idx_t, back(grad_d.index_select(0, idx_t)))
        return loss, grad

    def grouped_fused_losses(
        self, raw: Tensor, labels: Tensor, host_labels: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """fused_losses of every group: raw [G*C, B, O], labels [G, B, K] (or [B, K] for one group)."""
        if self.groups == 1:
            return self.fused_losses(raw, labels, host_labels)
        parts = [
            self.fused_losses(
                raw[self.group_cells(g)], labels[g], None if host_labels is None else host_labels[g]
            )
            for g in range(self.groups)
        ]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def step(
        self, x: Tensor, labels: Tensor, rngs: Sequence[Any], host_labels: Tensor | None = None
    ) -> Tensor:
        """One optimiser step of every cell on the batch (x, labels); returns the [C] losses (detached).

        ``host_labels``, a CPU copy of ``labels``, spares an accelerator a device-to-host wait per step.
        With stacked groups, x is [G, B, D], labels [G, B, K] and ``rngs`` every stacked cell's, in order.
        """
        training = self.training
        self.net.train()
        batch = x.shape[-2]
        noise = cell_noise(rngs, batch, training.hidden, training.dropout, x.dtype, x.device)
        raw = self.net(x, noise, self.groups)
        if self.use_fused:
            loss = _FusedLoss.apply(raw, self, labels, host_labels)
        elif self.groups == 1:
            embedded: list[Tensor] = []
            loss = self.losses(self.distances(raw, embedded=embedded), labels, embedded)
        else:
            parts = []
            for g in range(self.groups):
                embedded = []
                dist = self.distances(raw[self.group_cells(g)], embedded=embedded)
                parts.append(self.losses(dist, labels[g], embedded, g))
            loss = torch.cat(parts)
        self.optimizer.zero_grad(set_to_none=True)
        if self.prototypes is not None:
            self.prototypes.zero_grad()
        # The cells share no parameter, so the gradient of the sum is each cell's own gradient.
        loss.sum().backward()
        clip_per_cell_(self.params, training.grad_clip)
        self.optimizer.step()
        if self.prototypes is not None:
            self.prototypes.step()
        return loss.detach()

    @torch.no_grad()
    def embed(self, features: Tensor, chunk: int = 8192, *, group: int = 0) -> list[Tensor]:
        """Evaluation-mode embeddings of ``features`` for every cell of ``group`` (list in cell order)."""
        was_training = self.net.training
        self.net.eval()
        cells = None if self.groups == 1 else self.group_cells(group)
        out: list[list[Tensor]] = [[] for _ in self.specs]
        for start in range(0, features.shape[0], chunk):
            raw = self.net.output_layer(self.net.hidden_layer(features[start : start + chunk], cells), cells)
            for geometry, idx in self.heads:
                z = geometry.embed(raw[idx])
                for j, i in enumerate(idx):
                    out[i].append(z[j])
        self.net.train(was_training)
        return [torch.cat(parts) for parts in out]

    # -- per-cell state -----------------------------------------------------------------------------
    def geometry(self, i: int) -> Geometry:
        """The geometry of stacked cell ``i``."""
        i %= len(self.specs)
        return next(g for g, idx in self.heads if i in idx)

    def projector(self, i: int) -> Projector:
        """Stacked cell ``i`` as a stand-alone Projector (a copy of its current state)."""
        model = Projector(
            self.in_dim,
            geometry_of(self.specs[i % len(self.specs)].geometry, self.poincare),
            hidden=self.training.hidden,
            out_dim=self.training.out_dim,
            dropout=self.training.dropout,
        ).to(device=self.device, dtype=self.dtype)
        model.load_state_dict(self.net.cell_state(i))
        return model

    def cell_state(self, i: int) -> dict[str, Tensor]:
        return self.net.cell_state(i)

    def prototype_state(self, i: int) -> dict[str, Any] | None:
        """Stacked cell ``i``'s leaf prototypes and their optimiser state (None for a cell without)."""
        j = self._prototype_row.get(i % len(self.specs))
        if j is None:
            return None
        assert self.prototypes is not None
        return self.prototypes.state(i // len(self.specs) * len(self._prototype_row) + j)

    def _prototype_states(self, states: Sequence[dict[str, Any] | None] | None) -> list[dict[str, Any]]:
        """One group's prototype states in stack order, from per-cell ones (None for the other cells)."""
        if not self._prototype_row:
            return []
        if states is None or len(states) != len(self.specs):
            raise ValueError("restoring cells with leaf prototypes needs each cell's prototype state")
        picked = [states[i] for i in sorted(self._prototype_row)]
        if any(s is None for s in picked):
            raise ValueError("a cell whose objective owns leaf prototypes has no prototype state to restore")
        return [s for s in picked if s is not None]

    def optimizer_state(self, i: int) -> dict[str, Any]:
        """Cell ``i``'s AdamW state in the layout of a per-cell optimiser over Projector.parameters()."""
        full = self.optimizer.state_dict()
        state = {
            k: {
                name: (v[i] if name != "step" else v).detach().clone()
                for name, v in s.items()
                if torch.is_tensor(v)
            }
            for k, s in full["state"].items()
        }
        groups = [{**g, "params": list(range(len(PARAMS)))} for g in full["param_groups"]]
        return {"state": state, "param_groups": groups}

    def load(
        self,
        models: Sequence[dict[str, Tensor]],
        optimizers: Sequence[dict[str, Any]],
        prototypes: Sequence[dict[str, Any] | None] | None = None,
    ) -> None:
        """Restore from per-cell model and optimiser state dicts (as written by cell_state/optimizer_state)
        and, for the cells whose objective owns them, prototype states (``prototype_state``; None else)."""
        if self.prototypes is not None:
            if self.groups != 1:
                raise ValueError("a stack of several groups is restored group by group (load_group)")
            self.prototypes.load(self.group_prototypes(0), self._prototype_states(prototypes))
        self.net.load_cell_states(models)
        current = self.optimizer.state_dict()
        state: dict[int, dict[str, Tensor]] = {}
        for k in range(len(PARAMS)):
            cells = [o["state"].get(k, o["state"].get(str(k))) for o in optimizers]
            if any(s is None for s in cells):
                continue  # never stepped
            entry = {}
            for name in cells[0]:
                if name == "step":
                    steps = [s["step"] for s in cells]
                    if any(not torch.equal(steps[0], s) for s in steps[1:]):
                        raise ValueError("cells of a batched job must have taken the same number of steps")
                    entry["step"] = steps[0].clone()
                else:
                    entry[name] = torch.stack([s[name] for s in cells])
            state[k] = entry
        # Hyperparameters (lr, weight decay, fused) come from this job's optimiser, the moments from the file.
        self.optimizer.load_state_dict({"state": state, "param_groups": current["param_groups"]})


    @torch.no_grad()
    def load_group(
        self,
        g: int,
        models: Sequence[dict[str, Tensor]],
        optimizers: Sequence[dict[str, Any]],
        prototypes: Sequence[dict[str, Any] | None] | None = None,
    ) -> None:
        """Restore group ``g``'s cells alone (per-cell state dicts, as ``load`` takes), the others untouched.

        The groups share AdamW's step count (they always step together), so a group that brings optimiser
        state must bring the step count the stack already has, unless the stack has not stepped yet.
        """
        sl = self.group_cells(g)
        if len(models) != len(self.specs) or len(optimizers) != len(self.specs):
            raise ValueError(f"{len(models)} cell states for a group of {len(self.specs)} cells")
        if self.prototypes is not None:
            self.prototypes.load(self.group_prototypes(g), self._prototype_states(prototypes))
        for name, key in PARAMS + BUFFERS:
            target = getattr(self.net, name)
            target[sl].copy_(torch.stack([m[key].to(device=target.device) for m in models]))
        opt = self.optimizer
        assert isinstance(opt, FusedAdamW)  # checked in __init__ for groups > 1
        for k in range(len(PARAMS)):
            cells = [o["state"].get(k, o["state"].get(str(k))) for o in optimizers]
            if all(s is None for s in cells):
                continue
            if any(s is None for s in cells):
                raise ValueError("cells of a batched job must have taken the same number of steps")
            step = cells[0]["step"]
            if any(not torch.equal(step, s["step"]) for s in cells[1:]):
                raise ValueError("cells of a batched job must have taken the same number of steps")
            if opt.stepped and not torch.equal(opt.steps[k].cpu(), step.cpu().to(opt.steps[k].dtype)):
                raise ValueError("stacked jobs must resume from the same step count")
            opt.steps[k].copy_(step)
            opt.exp_avg[k][sl].copy_(torch.stack([s["exp_avg"] for s in cells]).to(opt.exp_avg[k]))
            opt.exp_avg_sq[k][sl].copy_(torch.stack([s["exp_avg_sq"] for s in cells]).to(opt.exp_avg_sq[k]))
        opt.stepped = opt.stepped or any(o["state"] for o in optimizers)


class CellStack(Protocol):
    """What the trainer asks of the batched engine for one job's cells (indices are the job's own)."""

    optimizer: Stepper

    def step(
        self, x: Tensor, labels: Tensor, rngs: Sequence[Any], host_labels: Tensor | None = None
    ) -> Tensor: ...
    def embed(self, features: Tensor, chunk: int = 8192) -> list[Tensor]: ...
    def geometry(self, i: int) -> Geometry: ...
    def projector(self, i: int) -> Projector: ...
    @property
    def steppers(self) -> tuple[Stepper, ...]: ...
    def cell_state(self, i: int) -> dict[str, Tensor]: ...
    def optimizer_state(self, i: int) -> dict[str, Any]: ...
    def prototype_state(self, i: int) -> dict[str, Any] | None: ...
    def load(
        self,
        models: Sequence[dict[str, Tensor]],
        optimizers: Sequence[dict[str, Any]],
        prototypes: Sequence[dict[str, Any] | None] | None = None,
    ) -> None: ...


class GroupView:
    """One job's cells (group ``g``) in a stack of several jobs, seen as that job's own BatchedCells.

    Training steps the whole stack at once (``engine.stacked``), never one group: ``step`` refuses.
    """

    def __init__(self, stack: BatchedCells, g: int):
        self.stack, self.g = stack, g
        self.optimizer = stack.optimizer
        self._first = g * stack.n_cells

    def step(
        self, x: Tensor, labels: Tensor, rngs: Sequence[Any], host_labels: Tensor | None = None
    ) -> Tensor:
        raise RuntimeError("a group of a stacked run steps with the whole stack (engine.stacked)")

    def embed(self, features: Tensor, chunk: int = 8192) -> list[Tensor]:
        return self.stack.embed(features, chunk, group=self.g)

    def geometry(self, i: int) -> Geometry:
        return self.stack.geometry(i)

    def projector(self, i: int) -> Projector:
        return self.stack.projector(self._first + i)

    def cell_state(self, i: int) -> dict[str, Tensor]:
        return self.stack.cell_state(self._first + i)

    def optimizer_state(self, i: int) -> dict[str, Any]:
        return self.stack.optimizer_state(self._first + i)

    @property
    def steppers(self) -> tuple[Stepper, ...]:
        return self.stack.steppers

    def prototype_state(self, i: int) -> dict[str, Any] | None:
        return self.stack.prototype_state(self._first + i)

    def load(
        self,
        models: Sequence[dict[str, Tensor]],
        optimizers: Sequence[dict[str, Any]],
        prototypes: Sequence[dict[str, Any] | None] | None = None,
    ) -> None:
        self.stack.load_group(self.g, models, optimizers, prototypes)


def _inverse(order: list[int], device: torch.device) -> Tensor | None:
    """Index that puts rows produced in ``order`` back into cell order (None if already in order)."""
    if order == sorted(order):
        return None
    inv = [0] * len(order)
    for pos, i in enumerate(order):
        inv[i] = pos
    return torch.tensor(inv, device=device)
