"""The projector: layer structure, parameter count and the geometry head."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from hierconsole.config import TrainingConfig
from hierconsole.engine.geometry import Euclidean, Poincare, norm_bound
from hierconsole.engine.projector import Projector, count_trainable

GEOMETRIES = [Euclidean(), Poincare(c=2.0, r=0.4), Poincare(c=1e-6, r=0.4)]
IDS = ["euclidean", "poincare-2", "poincare-1e-6"]


PROTOCOL = TrainingConfig()
"""The protocol's projector: 768-256-32 with dropout 0.1 (the presets' defaults)."""


def projector(in_dim: int, geometry, **options) -> Projector:
    """A Projector with the protocol's widths and dropout unless `options` say otherwise."""
    kwargs = {"hidden": PROTOCOL.hidden, "out_dim": PROTOCOL.out_dim, "dropout": PROTOCOL.dropout} | options
    return Projector(in_dim, geometry, **kwargs)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=IDS)
def test_trainable_parameter_count_at_768(geometry):
    model = projector(768, geometry)
    assert count_trainable(model) == 205_600
    # everything the optimiser sees belongs to the MLP; the curvature is neither trainable nor counted
    assert [n for n, p in model.named_parameters() if p.requires_grad] == [
        "fc1.weight",
        "fc1.bias",
        "bn.weight",
        "bn.bias",
        "fc2.weight",
        "fc2.bias",
    ]
    assert not any(p.requires_grad for p in model.geometry.parameters())


def test_count_follows_input_width_and_requires_grad():
    model = projector(100, Euclidean(), hidden=16, out_dim=4)
    assert count_trainable(model) == 100 * 16 + 16 + 2 * 16 + 16 * 4 + 4
    model.fc1.weight.requires_grad_(False)
    assert count_trainable(model) == 16 + 2 * 16 + 16 * 4 + 4


def test_both_geometries_share_state_layout():
    # the four cells of a seed start from one state: E and H projectors must have identical keys and shapes
    e, h = projector(768, Euclidean()), projector(768, Poincare(c=2.0, r=0.4))
    assert {k: v.shape for k, v in e.state_dict().items()} == {k: v.shape for k, v in h.state_dict().items()}
    h.load_state_dict(e.state_dict())
    torch.testing.assert_close(h.fc1.weight, e.fc1.weight)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_matches_manual_layers(geometry, dtype):
    torch.manual_seed(0)
    model = projector(24, geometry).to(dtype).eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics and affine terms
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        model.bn.weight.uniform_(0.5, 1.5)
        model.bn.bias.uniform_(-0.5, 0.5)
    f = torch.randn(10, 24, dtype=dtype)
    h = f @ model.fc1.weight.T + model.fc1.bias
    h = (h - model.bn.running_mean) / torch.sqrt(
        model.bn.running_var + model.bn.eps
    ) * model.bn.weight + model.bn.bias
    t = torch.clamp(h, min=0) @ model.fc2.weight.T + model.fc2.bias
    raw = model.raw(f)
    assert raw.shape == (10, 32) and raw.dtype == dtype
    torch.testing.assert_close(raw, t)
    torch.testing.assert_close(model(f), geometry.embed(t))
    if isinstance(geometry, Euclidean):
        torch.testing.assert_close(model(f).norm(dim=-1), torch.ones(10, dtype=dtype))
    else:
        assert model(f).norm(dim=-1).max().item() <= norm_bound(geometry.c, geometry.r) * (1 + 1e-6)


def test_training_mode_uses_batch_statistics_and_dropout():
    torch.manual_seed(1)
    model = projector(16, Euclidean(), dropout=0.5).train()
    f = torch.randn(64, 16)
    h = F.batch_norm(
        f @ model.fc1.weight.T + model.fc1.bias, None, None, model.bn.weight, model.bn.bias, True
    )
    torch.manual_seed(2)
    out = model.raw(f)
    torch.manual_seed(2)
    expected = F.dropout(torch.relu(h), 0.5, training=True) @ model.fc2.weight.T + model.fc2.bias
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=IDS)
def test_gradients_reach_every_trainable_parameter(geometry):
    torch.manual_seed(3)
    model = projector(12, geometry).train()
    z = model(torch.randn(8, 12))
    geometry.pairwise(z, clip_max=20.0).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.fc1.weight.grad.abs().sum() > 0


def test_casting_the_model_keeps_the_curvature_exact():
    model = projector(8, Poincare(c=1e-6, r=0.4)).double()
    assert model.fc1.weight.dtype == torch.float64
    model = model.float()
    assert model.fc1.weight.dtype == torch.float32
    assert model.geometry.ball.c.dtype == torch.float64 and model.geometry.ball.c.item() == 1e-6
