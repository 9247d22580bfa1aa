"""The 768-256-32 projector with its geometry head (paper Sec. 3.2 and S4)."""

from __future__ import annotations

from torch import Tensor, nn

from hierconsole.engine.geometry import Geometry


class Projector(nn.Module):
    """Linear(in_dim -> hidden) -> BatchNorm1d -> ReLU -> Dropout -> Linear(hidden -> out_dim) -> geometry.

    Both geometries get exactly the same trainable layers (205,600 parameters at 768-D input); the geometry
    head holds no trainable state, so the four cells of a seed can share one initial state.
    """

    def __init__(self, in_dim: int, geometry: Geometry, *, hidden: int, out_dim: int, dropout: float):
        # No defaults: the widths and the dropout rate are preset options (config.preset.TrainingConfig).
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.act = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, out_dim)
        self.geometry = geometry

    def raw(self, f: Tensor) -> Tensor:
        """The MLP output before the geometry: the tangent vector t of Eq. (6) for Poincaré."""
        return self.fc2(self.dropout(self.act(self.bn(self.fc1(f)))))

    def forward(self, f: Tensor) -> Tensor:
        return self.geometry.embed(self.raw(f))


def count_trainable(module: nn.Module) -> int:
    """Number of scalars that an optimiser would update (parameters with requires_grad)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
