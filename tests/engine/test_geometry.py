"""Geometry maps and distances against plain formulas and geoopt called point by point."""

from __future__ import annotations

import functools
import math

import geoopt
import pytest
import torch

from hierconsole.engine.geometry import (
    EVAL_CLIP,
    TRAIN_CLIP,
    Euclidean,
    Poincare,
    ball_radius,
    make_geometry,
    norm_bound,
)
from hierconsole.errors import ConfigError
from tests.engine.oracles import pairwise_reference

DTYPES = [torch.float32, torch.float64]
CURVATURES = [2.0, 0.1, 1e-6]


def _points(geometry, n: int, dim: int = 8, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return geometry.embed(torch.randn(n, dim, generator=g, dtype=dtype) * 2.0)


def test_operating_point_constants():
    assert TRAIN_CLIP == 20.0 and EVAL_CLIP == 1e6
    assert norm_bound(2.0, 0.4) == pytest.approx(0.362168, abs=5e-7)
    assert norm_bound(0.1, 0.4) == pytest.approx(0.397880, abs=5e-7)
    assert ball_radius(2.0) == pytest.approx(0.7071068, abs=1e-7)
    assert ball_radius(0.1) == pytest.approx(3.1622777, abs=1e-7)


def test_make_geometry_and_bad_config():
    assert isinstance(make_geometry("euclidean"), Euclidean)
    h = make_geometry("poincare", c=2.0, r=0.4)
    assert isinstance(h, Poincare) and (h.c, h.r) == (2.0, 0.4)
    with pytest.raises(ConfigError, match="unknown geometry"):
        make_geometry("hyperboloid")
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="curvature"):
            Poincare(c=bad)
    with pytest.raises(ConfigError, match="tangent scale"):
        Poincare(c=1.0, r=0.0)


@pytest.mark.parametrize("c", [*CURVATURES, 0.0037])
def test_curvature_is_exact_float64_and_not_trainable(c):
    h = Poincare(c=c, r=0.4)
    assert h.ball.c.dtype == torch.float64
    assert h.ball.c.item() == c  # geoopt's own softplus round trip gives 9.99999999962e-07 for 1e-6
    assert h.ball.k.item() == -c
    assert not any(p.requires_grad for p in h.parameters())
    assert h.state_dict() == {}
    # casting or moving a model must not round the curvature to float32
    h.float()
    h.to(torch.float16)
    assert h.ball.c.dtype == torch.float64 and h.ball.c.item() == c


@pytest.mark.parametrize("dtype", DTYPES)
def test_euclidean_embed_is_unit_norm(dtype):
    z = _points(Euclidean(), 20, dtype=dtype)
    assert z.dtype == dtype
    torch.testing.assert_close(z.norm(dim=-1), torch.ones(20, dtype=dtype))


@pytest.mark.parametrize("c", CURVATURES)
def test_poincare_embed_matches_eqs_6_7(c):
    r = 0.4
    h = Poincare(c=c, r=r)
    t = torch.randn(30, 8, dtype=torch.float64) * 3.0
    t[0] = 0.0  # the 1e-6 tangent-norm floor: a zero output maps to the origin
    t[1] = 1e-9  # below the floor
    t[2] = 3e-5  # just above it
    z = h.embed(t)
    for i in range(t.shape[0]):
        ti = t[i].tolist()
        n = max(math.sqrt(sum(v * v for v in ti)), 1e-6)
        tp = [r * math.tanh(n) * v / n for v in ti]
        s = math.sqrt(sum(v * v for v in tp))
        # exp_0^c(v) = tanh(sqrt(c)|v|) v / (sqrt(c)|v|), continuous at 0 (paper S5)
        scale = math.tanh(math.sqrt(c) * s) / (math.sqrt(c) * s) if s > 0 else 1.0
        expected = torch.tensor([scale * v for v in tp], dtype=torch.float64)
        torch.testing.assert_close(z[i], expected, rtol=1e-12, atol=0)
    assert z.norm(dim=-1).max().item() <= norm_bound(c, r) * (1 + 1e-12)


@pytest.mark.parametrize("c", [2.0, 0.1])
def test_poincare_embed_reaches_but_respects_the_audited_bound(c):
    z = Poincare(c=c, r=0.4).embed(torch.full((1, 32), 100.0, dtype=torch.float64))
    assert z.norm().item() == pytest.approx(norm_bound(c, 0.4), rel=1e-12)
    assert z.norm().item() < ball_radius(c)


def _geoopt_point_by_point(ball: geoopt.PoincareBall, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0], y.shape[0], dtype=x.dtype)
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            out[i, j] = ball.dist(x[i], y[j])
    return out


@pytest.mark.parametrize("c", CURVATURES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_poincare_pairwise_matches_geoopt_point_by_point(c, dtype):
    h = Poincare(c=c, r=0.4)
    x = _points(h, 9, seed=1, dtype=dtype)
    y = _points(h, 13, seed=2, dtype=dtype)
    # an independent geoopt ball in float64 on the same points is the truth for both dtypes
    truth = _geoopt_point_by_point(
        geoopt.PoincareBall(c=torch.tensor(c, dtype=torch.float64)), x.double(), y.double()
    )
    fast = h.pairwise(x, y, clip_max=EVAL_CLIP)
    assert fast.dtype == dtype
    tol = 1e-11 if dtype == torch.float64 else 2e-6
    torch.testing.assert_close(fast.double(), truth, rtol=0, atol=tol)
    torch.testing.assert_close(
        pairwise_reference(h, x, y, clip_max=EVAL_CLIP).double(), truth, rtol=0, atol=tol * 50
    )


@pytest.mark.parametrize("c", [2.0, 0.1])
def test_poincare_fast_equals_geoopt_in_float32(c):
    h = Poincare(c=c, r=0.4)
    x = _points(h, 40, seed=3, dtype=torch.float32)
    y = _points(h, 50, seed=4, dtype=torch.float32)
    ref = pairwise_reference(h, x, y, clip_max=EVAL_CLIP)
    torch.testing.assert_close(h.pairwise(x, y, clip_max=EVAL_CLIP), ref, rtol=0, atol=2e-6)


@pytest.mark.parametrize("c", CURVATURES)
def test_poincare_pairwise_matches_literal_acosh_formula(c):
    h = Poincare(c=c, r=0.4)
    x = _points(h, 7, seed=5)
    y = _points(h, 6, seed=6)
    d = h.pairwise(x, y, clip_max=EVAL_CLIP)
    for i in range(7):
        for j in range(6):
            xi, yj = x[i].tolist(), y[j].tolist()
            diff2 = sum((a - b) ** 2 for a, b in zip(xi, yj, strict=True))
            ax = 1 - c * sum(a * a for a in xi)
            ay = 1 - c * sum(b * b for b in yj)
            expected = math.acosh(1 + 2 * c * diff2 / (ax * ay)) / math.sqrt(c)
            assert d[i, j].item() == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_euclidean_pairwise_matches_loop(dtype):
    e = Euclidean()
    g = torch.Generator().manual_seed(7)
    x = torch.randn(8, 5, generator=g, dtype=dtype) * 3  # pairwise does not assume unit norm
    y = torch.randn(11, 5, generator=g, dtype=dtype)
    d = e.pairwise(x, y, clip_max=EVAL_CLIP)
    expected = torch.tensor([[math.dist(a.tolist(), b.tolist()) for b in y] for a in x], dtype=torch.float64)
    tol = 1e-12 if dtype == torch.float64 else 5e-6
    torch.testing.assert_close(d.double(), expected, rtol=tol, atol=tol)
    torch.testing.assert_close(
        pairwise_reference(e, x, y, clip_max=EVAL_CLIP).double(), expected, rtol=tol, atol=tol
    )


@pytest.mark.parametrize("geometry", [Euclidean(), Poincare(c=2.0, r=0.4)], ids=["euclidean", "poincare"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_self_distances_have_zero_diagonal_and_finite_gradient(geometry, dtype):
    g = torch.Generator().manual_seed(8)
    t = torch.randn(12, 6, generator=g, dtype=dtype)
    t[5] = t[2]  # an exact duplicate: zero distance off the diagonal too
    t.requires_grad_(True)
    z = geometry.embed(t)
    d = geometry.pairwise(z, clip_max=TRAIN_CLIP)
    assert torch.equal(d.diagonal(), torch.zeros(12, dtype=dtype))
    assert d[2, 5].item() <= 1e-3
    (d * torch.rand(12, 12, generator=g, dtype=dtype)).sum().backward()
    assert torch.isfinite(t.grad).all()
    assert t.grad.abs().sum() > 0
    # y given as the very same tensor is the same as y omitted
    torch.testing.assert_close(geometry.pairwise(z, z, clip_max=TRAIN_CLIP), d, rtol=0, atol=0)


@pytest.mark.parametrize(
    "geometry", [Euclidean(), Poincare(c=2.0, r=0.4), Poincare(c=1e-6, r=0.4)], ids=["e", "h2", "h1e-6"]
)
def test_gradient_matches_reference_off_the_diagonal(geometry):
    g = torch.Generator().manual_seed(9)
    x = geometry.embed(torch.randn(6, 4, generator=g, dtype=torch.float64)).requires_grad_(True)
    y = geometry.embed(torch.randn(5, 4, generator=g, dtype=torch.float64)).requires_grad_(True)
    w = torch.rand(6, 5, generator=g, dtype=torch.float64)
    grads = []
    for f in (geometry.pairwise, functools.partial(pairwise_reference, geometry)):
        gx, gy = torch.autograd.grad((f(x, y, clip_max=EVAL_CLIP) * w).sum(), (x, y))
        grads.append(torch.cat([gx, gy]))
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("geometry", [Euclidean(), Poincare(c=0.1, r=0.4)], ids=["euclidean", "poincare"])
def test_leading_cell_axis(geometry):
    g = torch.Generator().manual_seed(10)
    x = geometry.embed(torch.randn(4, 7, 5, generator=g))
    y = geometry.embed(torch.randn(4, 9, 5, generator=g))
    batched = geometry.pairwise(x, y, clip_max=TRAIN_CLIP)
    within = geometry.pairwise(x, clip_max=TRAIN_CLIP)
    assert batched.shape == (4, 7, 9) and within.shape == (4, 7, 7)
    for cell in range(4):
        torch.testing.assert_close(batched[cell], geometry.pairwise(x[cell], y[cell], clip_max=TRAIN_CLIP))
        torch.testing.assert_close(within[cell], geometry.pairwise(x[cell], clip_max=TRAIN_CLIP))


@pytest.mark.parametrize("grad", [False, True], ids=["eval", "train"])
def test_non_finite_values_are_sanitised_and_clipped(grad):
    e = Euclidean()
    x = torch.tensor([[0.0, 0.0], [30.0, 40.0], [float("nan"), 0.0]], requires_grad=grad)
    d = e.pairwise(x, clip_max=TRAIN_CLIP)
    assert torch.isfinite(d).all() and d.requires_grad == grad
    assert d[0, 1].item() == TRAIN_CLIP  # 50 clipped to 20
    # a NaN point is as far as allowed from every other point; its self-distance is zero by definition
    assert d[2, :2].tolist() == [TRAIN_CLIP] * 2 and d[:2, 2].tolist() == [TRAIN_CLIP] * 2 and d[2, 2] == 0
    assert e.pairwise(x[:2], x[:2].clone(), clip_max=EVAL_CLIP)[0, 1].item() == pytest.approx(50.0)

    h = Poincare(c=1.0, r=0.4)
    outside = torch.tensor([[0.0, 0.0], [0.9999999, 0.0], [5.0, 0.0], [-5.0, 0.0]], dtype=torch.float64)
    outside.requires_grad_(grad)
    for f in (h.pairwise, functools.partial(pairwise_reference, h)):
        d = f(outside, outside.clone(), clip_max=TRAIN_CLIP)
        assert torch.isfinite(d).all() and (d >= 0).all() and (d <= TRAIN_CLIP).all()
    # points beyond the boundary are projected inside first (paper S5), so they get a finite distance
    fast = h.pairwise(outside, outside.clone(), clip_max=EVAL_CLIP)
    a = 1 - 1e-5  # geoopt's float64 projection margin
    assert fast[2, 3].item() == pytest.approx(4 * math.atanh(a), rel=1e-9)  # d(a, -a) = 4 artanh(a) at c = 1
    # geoopt saturates there (its artanh clamps at 1 - 1e-7); embed() never comes near: |z| <= norm_bound
    ref = pairwise_reference(h, outside, outside.clone(), clip_max=EVAL_CLIP)
    assert ref[2, 3].item() == pytest.approx(2 * math.atanh(1 - 1e-7), rel=1e-6)
    torch.testing.assert_close(fast[0], ref[0], rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_matches_cpu_with_the_curvature_left_on_cpu():
    h = Poincare(c=2.0, r=0.4)
    t = torch.randn(50, 32, generator=torch.Generator().manual_seed(11))
    model_like = torch.nn.Sequential(h).cuda()  # moving a parent must leave the curvature a CPU float64
    assert h.ball.c.device.type == "cpu" and h.ball.c.dtype == torch.float64
    z_cpu, z_gpu = h.embed(t), model_like[0].embed(t.cuda())
    torch.testing.assert_close(z_gpu.cpu(), z_cpu, rtol=1e-5, atol=1e-6)
    for geometry in (h, Euclidean()):
        a, b = geometry.embed(t), geometry.embed(t.flip(0))
        torch.testing.assert_close(
            geometry.pairwise(a.cuda(), b.cuda(), clip_max=EVAL_CLIP).cpu(),
            geometry.pairwise(a, b, clip_max=EVAL_CLIP),
            rtol=1e-5,
            atol=1e-5,
        )
