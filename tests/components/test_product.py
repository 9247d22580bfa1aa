"""The Euclidean x Poincaré product against the literal formula and geoopt's ProductManifold."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from hierconsole.components.product import Product, split_width
from hierconsole.engine.geometry import EVAL_CLIP, TRAIN_CLIP, Euclidean, Poincare, ball_radius, norm_bound
from hierconsole.errors import ConfigError
from tests.components.geometry_checks import (
    gradient_matches,
    leading_cell_axis,
    raw,
    zero_diagonal_and_finite_gradient,
)
from tests.components.references import ball_point, product_formula, product_geoopt

DTYPES = [torch.float32, torch.float64]
CURVATURES = [2.0, 0.1, 1e-6]
WIDTHS = [8, 7]  # an odd width gives the Poincaré half the extra coordinate
R = 0.4

_raw = raw


def test_name_split_and_bad_config():
    assert Product.name == "product"
    p = Product(c=2.0, r=0.4)
    assert (p.c, p.r) == (2.0, 0.4) and Product(c=1.0).r is None
    assert [split_width(w) for w in (2, 3, 8, 9)] == [1, 1, 4, 4]
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="curvature"):
            Product(c=bad)
    with pytest.raises(ConfigError, match="tangent scale"):
        Product(c=1.0, r=-1.0)
    with pytest.raises(ValueError, match="tangent scale"):
        Product(c=1.0).embed(torch.zeros(2, 4))
    for f in (p.embed, functools.partial(p.pairwise, clip_max=EVAL_CLIP)):
        with pytest.raises(ValueError, match="at least 2"):
            f(torch.zeros(3, 1))
    with pytest.raises(ValueError, match="widths differ"):
        p.pairwise(torch.zeros(2, 3), torch.zeros(2, 4), clip_max=EVAL_CLIP)


def test_curvature_stays_exact_and_nothing_trains():
    p = Product(c=1e-6, r=R)
    assert list(p.parameters()) == [] and p.state_dict() == {}
    p.float()
    assert p.poincare.ball.c.dtype == torch.float64 and p.poincare.ball.c.item() == 1e-6


@pytest.mark.parametrize("c", CURVATURES)
@pytest.mark.parametrize("width", WIDTHS)
def test_embed_is_the_two_halves(c, width):
    t = _raw(20, width, seed=0)
    t[0] = 0.0
    t[1, width // 2 :] = 1e-9  # the Poincaré half below the tangent-norm floor
    z = Product(c=c, r=R).embed(t)
    n1 = width // 2
    assert z.shape == (20, width) and z.dtype == torch.float64
    euclid = [[v / math.sqrt(sum(u * u for u in row)) for v in row] for row in t[1:, :n1].tolist()]
    torch.testing.assert_close(z[1:, :n1], torch.tensor(euclid, dtype=torch.float64), rtol=1e-12, atol=0)
    assert z[0].tolist() == [0.0] * width  # normalize leaves a zero half at zero; the ball's origin
    ball = [ball_point(row, c, R) for row in t[:, n1:].tolist()]
    torch.testing.assert_close(z[:, n1:], torch.tensor(ball, dtype=torch.float64), rtol=1e-12, atol=0)
    torch.testing.assert_close(z[:, :n1], Euclidean().embed(t[:, :n1]), rtol=0, atol=0)
    torch.testing.assert_close(z[:, n1:], Poincare(c=c, r=R).embed(t[:, n1:]), rtol=0, atol=0)


@pytest.mark.parametrize("c", [2.0, 0.1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_poincare_half_stays_inside_the_ball(c, dtype):
    t = _raw(3, 30, 9, seed=1, dtype=dtype) * torch.logspace(-6, 6, 30, dtype=dtype).unsqueeze(-1)
    t[0, 0] = 1e30
    h = Product(c=c, r=R).embed(t)[..., 4:]
    norms = h.double().norm(dim=-1)
    assert norms.max().item() <= norm_bound(c, R) * (1 + 1e-6) and norms.max().item() < ball_radius(c)
    assert (1 - c * norms**2 > 0.5).all()


@pytest.mark.parametrize("c", CURVATURES)
@pytest.mark.parametrize("width", WIDTHS)
def test_pairwise_matches_the_formula_and_geoopt(c, width):
    p = Product(c=c, r=R)
    x, y = p.embed(_raw(9, width, seed=2)), p.embed(_raw(13, width, seed=3))
    d = p.pairwise(x, y, clip_max=EVAL_CLIP)
    assert d.shape == (9, 13) and d.dtype == torch.float64
    torch.testing.assert_close(d, product_formula(x, y, c), rtol=0, atol=1e-6)
    torch.testing.assert_close(d, product_geoopt(x, y, c), rtol=0, atol=1e-6)


@pytest.mark.parametrize("c", CURVATURES)
def test_leading_cell_axis(c):
    leading_cell_axis(Product(c=c, r=R), c, product_formula, product_geoopt, (4, 5), product_geoopt)


@pytest.mark.parametrize("c", [2.0, 1e-6])
@pytest.mark.parametrize("dtype", DTYPES)
def test_self_distances_have_zero_diagonal_and_finite_gradient(c, dtype):
    zero_diagonal_and_finite_gradient(Product(c=c, r=R), 6, dtype)


@pytest.mark.parametrize("c", CURVATURES)
def test_gradient_matches_the_formula_off_the_diagonal(c):
    gradient_matches(Product(c=c, r=R), c, product_formula, 5, (7, 8, 9))


@pytest.mark.parametrize("grad", [False, True], ids=["eval", "train"])
def test_clipping_the_parts_leaves_the_combination_exact(grad):
    # c = 1; the Euclidean half is used as given (pairwise does not normalise). The Poincaré points stay
    # inside geoopt's float64 projection margin (|x| <= 1 - 1e-5), which the formula does not apply.
    p = Product(c=1.0)
    x = torch.tensor(
        [
            [0.0, 0.0, 0.0, 0.0],
            [30.0, 0.0, 0.0, 0.0],  # from the origin: the Euclidean part alone (30) beyond the bound of 20
            [0.0, 0.0, -0.99998, 0.0],  # to the next: the Poincaré part alone (~23.0) beyond it
            [0.0, 0.0, 0.99998, 0.0],
            [12.0, 0.0, 0.9999, 0.0],  # from the origin: parts 12 and ~9.9, the combination (~15.6) below
            [0.0, 17.0, 0.0, 0.99998],  # from the origin: parts 17 and ~11.5, the combination (~20.5) beyond
        ],
        dtype=torch.float64,
        requires_grad=grad,
    )
    d = p.pairwise(x, clip_max=TRAIN_CLIP)
    assert d.requires_grad == grad
    truth = product_formula(x.detach(), x.detach(), 1.0)
    assert truth[0, 1] > TRAIN_CLIP and truth[2, 3] > TRAIN_CLIP and truth[0, 4] < TRAIN_CLIP
    assert TRAIN_CLIP < truth[0, 5] < TRAIN_CLIP + 1
    off = ~torch.eye(6, dtype=torch.bool)
    torch.testing.assert_close(d[off], truth.clamp_max(TRAIN_CLIP)[off], rtol=1e-9, atol=0)
    assert d[0, 1] == d[2, 3] == d[0, 5] == TRAIN_CLIP
    assert d[0, 4].item() == pytest.approx(truth[0, 4].item(), rel=1e-10)
    # the same pairs with a bound above every distance: nothing clipped, parts included
    torch.testing.assert_close(p.pairwise(x, clip_max=EVAL_CLIP)[off], truth[off], rtol=1e-9, atol=0)


@pytest.mark.parametrize("grad", [False, True], ids=["eval", "train"])
def test_non_finite_values_are_sanitised_and_clipped(grad):
    p = Product(c=2.0, r=R)
    t = _raw(5, 6, seed=10)
    t[1, 0] = float("nan")  # in the Euclidean half
    t[3, 4] = float("nan")  # in the Poincaré half
    t[4, 5] = float("inf")
    t.requires_grad_(grad)
    z = p.embed(t)
    for d in (p.pairwise(z, clip_max=TRAIN_CLIP), p.pairwise(z, z.detach().clone(), clip_max=TRAIN_CLIP)):
        assert torch.isfinite(d).all() and d.requires_grad == grad
        for bad in (1, 3, 4):
            others = [j for j in range(5) if j != bad]
            assert d[bad, others].tolist() == [TRAIN_CLIP] * 4 and d[others, bad].tolist() == [TRAIN_CLIP] * 4
        assert 0 < d[0, 2].item() < TRAIN_CLIP
    assert p.pairwise(z, clip_max=TRAIN_CLIP).diagonal().tolist() == [0.0] * 5


@pytest.mark.parametrize("dtype", DTYPES)
def test_deterministic_on_cpu(dtype):
    p = Product(c=0.1, r=R)
    tx, ty = _raw(2, 40, 16, seed=11, dtype=dtype), _raw(2, 30, 16, seed=12, dtype=dtype)

    def run() -> list[torch.Tensor]:
        return [
            p.embed(tx),
            p.pairwise(p.embed(tx), p.embed(ty), clip_max=EVAL_CLIP),
            p.pairwise(p.embed(tx), clip_max=TRAIN_CLIP),
        ]

    for a, b in zip(run(), run(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("c", CURVATURES)
def test_float32_agrees_with_float64_for_far_pairs(c):
    p = Product(c=c, r=R)
    tx, ty = _raw(40, 16, seed=13), _raw(50, 16, seed=14)
    d32 = p.pairwise(p.embed(tx.float()), p.embed(ty.float()), clip_max=EVAL_CLIP)
    d64 = p.pairwise(p.embed(tx), p.embed(ty), clip_max=EVAL_CLIP)
    assert d32.dtype == torch.float32 and d64.min() > 1e-2
    torch.testing.assert_close(d32.double(), d64, rtol=0, atol=1e-4)
