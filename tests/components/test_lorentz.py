"""The hyperboloid geometry against the literal formula, geoopt's Lorentz manifold and the Poincaré ball."""

from __future__ import annotations

import math

import pytest
import torch

from hierconsole.components.lorentz import Lorentz
from hierconsole.engine.geometry import EVAL_CLIP, TRAIN_CLIP, Poincare
from hierconsole.errors import ConfigError
from tests.components.geometry_checks import (
    gradient_matches,
    leading_cell_axis,
    raw,
    zero_diagonal_and_finite_gradient,
)
from tests.components.references import (
    ball_point,
    ball_to_hyperboloid,
    geoopt_hyperboloid,
    hyperboloid_to_ball,
    lorentz_formula,
    lorentz_geoopt,
    lorentz_point,
)

DTYPES = [torch.float32, torch.float64]
CURVATURES = [2.0, 0.1, 1e-6]
R = 0.4

_raw = raw


def _minkowski_self(x: torch.Tensor) -> torch.Tensor:
    return -(x[..., 0] ** 2) + (x[..., 1:] ** 2).sum(-1)


def test_name_and_bad_config():
    assert Lorentz.name == "lorentz"
    h = Lorentz(c=2.0, r=0.4)
    assert (h.c, h.r) == (2.0, 0.4) and Lorentz(c=1.0).r is None
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="curvature"):
            Lorentz(c=bad)
    with pytest.raises(ConfigError, match="tangent scale"):
        Lorentz(c=1.0, r=0.0)
    with pytest.raises(ValueError, match="tangent scale"):
        Lorentz(c=1.0).embed(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="widths differ"):
        h.pairwise(torch.zeros(2, 3), torch.zeros(2, 4), clip_max=EVAL_CLIP)


@pytest.mark.parametrize("c", [*CURVATURES, 0.0037])
def test_curvature_is_exact_float64_and_not_trainable(c):
    h = Lorentz(c=c, r=R)
    assert h.manifold.k.dtype == torch.float64 and h.manifold.k.item() == 1.0 / c
    assert not any(p.requires_grad for p in h.parameters()) and list(h.parameters()) == []
    assert h.state_dict() == {}
    assert [name for name, _ in h.named_buffers()] == ["manifold.k"]  # held, but not persisted
    h.float()
    h.to(torch.float16)
    assert h.manifold.k.dtype == torch.float64 and h.manifold.k.item() == 1.0 / c


@pytest.mark.parametrize("c", CURVATURES)
def test_embed_matches_the_literal_point_and_geoopt_expmap0(c):
    t = _raw(30, 8, seed=0) * 1.5
    t[0] = 0.0  # the 1e-6 tangent-norm floor: a zero output maps to the origin
    t[1] = 1e-9  # below the floor
    t[2] = 3e-5  # just above it
    z = Lorentz(c=c, r=R).embed(t)
    assert z.shape == (30, 9) and z.dtype == torch.float64
    expected = torch.tensor([lorentz_point(row, c, R) for row in t.tolist()], dtype=torch.float64)
    # geoopt floors the tangent norm at 1e-4 inside expmap0 (sinh(s)/s read at 1e-4 instead of s), a
    # relative change of at most c * 1e-8 / 6 for the three points nearest the origin; exact beyond
    torch.testing.assert_close(z[:3], expected[:3], rtol=1e-8, atol=0)
    torch.testing.assert_close(z[3:], expected[3:], rtol=1e-12, atol=0)
    assert z[0, 1:].tolist() == [0.0] * 8 and z[0, 0].item() == pytest.approx(1.0 / math.sqrt(c), rel=1e-15)
    # geoopt's own expmap0 on the tangent (0, 2t') of the same output
    n = t.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    tangent = torch.cat([torch.zeros(30, 1, dtype=torch.float64), 2 * R * torch.tanh(n) * t / n], dim=-1)
    torch.testing.assert_close(z, geoopt_hyperboloid(c).expmap0(tangent), rtol=1e-12, atol=0)


@pytest.mark.parametrize("c", CURVATURES)
def test_embed_lies_on_the_hyperboloid(c):
    t = _raw(4, 50, 16, seed=1) * torch.logspace(-8, 3, 50, dtype=torch.float64).unsqueeze(-1)
    z = Lorentz(c=c, r=R).embed(t)
    assert z.shape == (4, 50, 17)
    torch.testing.assert_close(
        -c * _minkowski_self(z), torch.ones(4, 50, dtype=torch.float64), rtol=0, atol=1e-9
    )
    assert (z[..., 0] > 0).all()


@pytest.mark.parametrize("c", CURVATURES)
def test_the_isometry_onto_the_ball_carries_the_poincare_embedding(c):
    t = _raw(25, 8, seed=2)
    t[0] = 0.0
    lorentz, ball = Lorentz(c=c, r=R).embed(t), Poincare(c=c, r=R).embed(t)
    # x_ball = x_s / (1 + sqrt(c) x0): a point at hyperbolic distance rho has sinh/(1 + cosh) = tanh(rho/2)
    torch.testing.assert_close(hyperboloid_to_ball(lorentz, c), ball, rtol=1e-12, atol=1e-15)
    literal = torch.tensor([ball_point(row, c, R) for row in t.tolist()], dtype=torch.float64)
    torch.testing.assert_close(hyperboloid_to_ball(lorentz, c), literal, rtol=1e-12, atol=1e-15)
    # and back: x0 = (1 + c|b|^2) / (sqrt(c) (1 - c|b|^2)), x_s = 2b / (1 - c|b|^2)
    torch.testing.assert_close(ball_to_hyperboloid(ball, c), lorentz, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("c", CURVATURES)
def test_same_raw_outputs_give_the_poincare_distances(c):
    h, p = Lorentz(c=c, r=R), Poincare(c=c, r=R)
    tx, ty = _raw(20, 8, seed=3), _raw(17, 8, seed=4)
    d = h.pairwise(h.embed(tx), h.embed(ty), clip_max=EVAL_CLIP)
    assert d.min() > 1e-3  # far pairs: the two Gram forms cancel differently near zero
    torch.testing.assert_close(d, p.pairwise(p.embed(tx), p.embed(ty), clip_max=EVAL_CLIP), rtol=0, atol=1e-6)
    # distance from the origin: twice the tangent length, as the ball's expmap0 has it
    origin = h.embed(torch.zeros(1, 8, dtype=torch.float64))
    n = tx.norm(dim=-1)
    torch.testing.assert_close(h.pairwise(origin, h.embed(tx), clip_max=EVAL_CLIP)[0], 2 * R * torch.tanh(n))


@pytest.mark.parametrize("c", CURVATURES)
def test_pairwise_matches_the_formula_and_geoopt(c):
    h = Lorentz(c=c, r=R)
    x, y = h.embed(_raw(9, 8, seed=5)), h.embed(_raw(13, 8, seed=6))
    d = h.pairwise(x, y, clip_max=EVAL_CLIP)
    assert d.shape == (9, 13) and d.dtype == torch.float64
    torch.testing.assert_close(d, lorentz_formula(x, y, c), rtol=0, atol=1e-6)
    torch.testing.assert_close(d, lorentz_geoopt(x, y, c), rtol=0, atol=1e-6)
    for i in range(9):  # one by one in Python floats: acosh(-c <x, y>_L) / sqrt(c)
        for j in range(13):
            xi, yj = x[i].tolist(), y[j].tolist()
            inner = -xi[0] * yj[0] + sum(a * b for a, b in zip(xi[1:], yj[1:], strict=True))
            assert d[i, j].item() == pytest.approx(math.acosh(-c * inner) / math.sqrt(c), abs=1e-6)


@pytest.mark.parametrize("c", CURVATURES)
def test_leading_cell_axis(c):
    leading_cell_axis(Lorentz(c=c, r=R), c, lorentz_formula, lorentz_geoopt, (7, 8), lorentz_formula)


@pytest.mark.parametrize("c", [2.0, 1e-6])
@pytest.mark.parametrize("dtype", DTYPES)
def test_self_distances_have_zero_diagonal_and_finite_gradient(c, dtype):
    zero_diagonal_and_finite_gradient(Lorentz(c=c, r=R), 9, dtype)


@pytest.mark.parametrize("c", CURVATURES)
def test_gradient_matches_the_formula_off_the_diagonal(c):
    gradient_matches(Lorentz(c=c, r=R), c, lorentz_formula, 4, (10, 11, 12))


@pytest.mark.parametrize("grad", [False, True], ids=["eval", "train"])
def test_non_finite_values_are_sanitised_and_clipped(grad):
    h = Lorentz(c=2.0, r=R)
    t = _raw(4, 5, seed=13)
    t[1, 3] = float("nan")
    t[3, 0] = float("inf")
    t.requires_grad_(grad)
    z = h.embed(t)
    for d in (h.pairwise(z, clip_max=TRAIN_CLIP), h.pairwise(z, z.detach().clone(), clip_max=TRAIN_CLIP)):
        assert torch.isfinite(d).all() and d.requires_grad == grad
        for bad in (1, 3):
            others = [j for j in range(4) if j != bad]
            assert d[bad, others].tolist() == [TRAIN_CLIP] * 3 and d[others, bad].tolist() == [TRAIN_CLIP] * 3
        assert 0 < d[0, 2].item() < TRAIN_CLIP
    assert h.pairwise(z, clip_max=TRAIN_CLIP).diagonal().tolist() == [0.0] * 4
    # an undefined time coordinate alone marks the point undefined, though pairwise recomputes x0
    good = h.embed(_raw(3, 5, seed=14))
    for bad in (float("nan"), float("inf"), -float("inf")):
        z = good.clone()
        z[1, 0] = bad
        d = h.pairwise(z, clip_max=EVAL_CLIP)
        assert d[1, [0, 2]].tolist() == [EVAL_CLIP] * 2 and d[[0, 2], 1].tolist() == [EVAL_CLIP] * 2
    # distances beyond the bound are clipped to it: r = 20 reaches 80 at c = 2
    far = Lorentz(c=2.0, r=20.0)
    d = far.pairwise(far.embed(_raw(6, 5, seed=15) * 10), clip_max=TRAIN_CLIP)
    assert d.max().item() == TRAIN_CLIP and torch.isfinite(d).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_deterministic_on_cpu(dtype):
    h = Lorentz(c=0.1, r=R)
    tx, ty = _raw(2, 40, 16, seed=16, dtype=dtype), _raw(2, 30, 16, seed=17, dtype=dtype)

    def run() -> list[torch.Tensor]:
        return [
            h.embed(tx),
            h.pairwise(h.embed(tx), h.embed(ty), clip_max=EVAL_CLIP),
            h.pairwise(h.embed(tx), clip_max=TRAIN_CLIP),
        ]

    for a, b in zip(run(), run(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("c", CURVATURES)
def test_float32_agrees_with_float64_for_far_pairs(c):
    h = Lorentz(c=c, r=R)
    tx, ty = _raw(40, 16, seed=18), _raw(50, 16, seed=19)
    d32 = h.pairwise(h.embed(tx.float()), h.embed(ty.float()), clip_max=EVAL_CLIP)
    d64 = h.pairwise(h.embed(tx), h.embed(ty), clip_max=EVAL_CLIP)
    assert d32.dtype == torch.float32 and d64.min() > 1e-2
    torch.testing.assert_close(d32.double(), d64, rtol=0, atol=1e-4)


def test_the_literal_time_column_gemm_would_fail_in_float32_at_small_curvature():
    # Why pairwise recomputes x0 instead of using [-x0, x_s] . [y0, y_s]: at c = 1e-6 x0 ~ 1e3, the inner
    # products ~1e6, and float32 cannot resolve -c<x, y>_L - 1 ~ 1e-7 from them.
    c = 1e-6
    h = Lorentz(c=c, r=R)
    tx, ty = _raw(40, 16, seed=18), _raw(50, 16, seed=19)
    truth = lorentz_formula(h.embed(tx), h.embed(ty), c)  # float64 throughout
    x, y = h.embed(tx.float()), h.embed(ty.float())
    literal = torch.acosh((-c * (x * torch.tensor([-1.0] + [1.0] * 16)) @ y.T).clamp_min(1.0)) / math.sqrt(c)
    assert (literal.double() - truth).abs().max() > 0.1
    torch.testing.assert_close(h.pairwise(x, y, clip_max=EVAL_CLIP).double(), truth, rtol=0, atol=1e-4)
