"""Hierarchical NDCG@k and mistake severity@k against plain loops in float64: random cases, ties, a gallery
smaller than k, queries that share nothing with the gallery or make no mistake, and chunking."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hierconsole.metrics import ranking_metrics
from hierconsole.metrics.distances import poincare


def _height(a, b) -> int:
    for level, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y:
            return level
    return len(a)


def _reference(d, q_lab, g_lab, ks, gain):
    """Per query and k: (NDCG, mistake severity), NaN where undefined, written out from the definitions."""
    levels = len(q_lab[0])
    g = lambda rel: (2.0**rel - 1.0) if gain == "exp" else float(rel)  # noqa: E731
    out = []
    for qi, row in enumerate(d):
        ranked = sorted(range(len(row)), key=lambda j: (row[j], j))  # ties by gallery index
        heights = [_height(q_lab[qi], g_lab[j]) for j in ranked]
        ideal = sorted(heights)
        per_k = []
        for k in ks:
            top, best = heights[:k], ideal[:k]
            dcg = sum(g(levels - h) / math.log2(i + 2) for i, h in enumerate(top))
            idcg = sum(g(levels - h) / math.log2(i + 2) for i, h in enumerate(best))
            mistakes = [h for h in top if h > 0]
            per_k.append((dcg / idcg if idcg > 0 else math.nan, sum(mistakes) / len(mistakes) if mistakes else math.nan))
        out.append(per_k)
    return out


def _tree_labels(leaves: np.ndarray) -> np.ndarray:
    """Leaf j's parent j // 3, grandparent j // 9: a three-level tree."""
    return np.stack([leaves, leaves // 3, leaves // 9], axis=1)


def _check(got, d, q_lab, g_lab, ks, gain):
    want = _reference(d.tolist(), q_lab.tolist(), g_lab.tolist(), ks, gain)
    for qi in range(len(want)):
        for i in range(len(ks)):
            for name, value, expected in (("ndcg", got.ndcg[qi, i], want[qi][i][0]), ("severity", got.mistake_severity[qi, i], want[qi][i][1])):
                if math.isnan(expected):
                    assert math.isnan(value), (name, qi, ks[i])
                else:
                    assert value == pytest.approx(expected, abs=1e-12), (name, qi, ks[i])


@pytest.mark.parametrize("gain", ["exp", "linear"])
def test_random_rankings_equal_the_plain_loop(gain):
    rng = np.random.default_rng(3)
    q, g = rng.normal(size=(25, 4)), rng.normal(size=(60, 4))
    q_lab, g_lab = _tree_labels(rng.integers(0, 18, 25)), _tree_labels(rng.integers(0, 18, 60))
    ks = (1, 3, 10, 100)  # 100 > the gallery: the whole of it
    got = ranking_metrics(q, g, q_lab, g_lab, ks=ks, gain=gain)
    d = np.sqrt(((q[:, None] - g[None]) ** 2).sum(-1))
    _check(got, d, q_lab, g_lab, ks, gain)
    # Chunked a row at a time: the same numbers.
    small = ranking_metrics(q, g, q_lab, g_lab, ks=ks, gain=gain, memory_budget=1)
    assert np.array_equal(small.ndcg, got.ndcg, equal_nan=True)
    assert np.array_equal(small.mistake_severity, got.mistake_severity, equal_nan=True)


def test_ties_rank_by_gallery_index_and_undefined_queries_are_left_out():
    # Every gallery item at one distance: the ranking is the gallery's order.
    q = np.zeros((3, 2))
    g = np.ones((6, 2))
    g_lab = _tree_labels(np.array([20, 0, 1, 3, 9, 0]))
    q_lab = np.array([[0, 0, 0], [1, 0, 0], [50, 50, 50]])  # the last shares no level with the gallery
    got = ranking_metrics(q, g, q_lab, g_lab, ks=(1, 2, 6), gain="exp")
    _check(got, np.ones((3, 6)), q_lab, g_lab, (1, 2, 6), "exp")
    # Query 0 (leaf 0): leaf 20 shares nothing (height 3), then its own leaf, then leaves 1, 3, 9 at
    # heights 1, 2, 3.
    assert got.mistake_severity[0].tolist() == [3.0, 3.0, pytest.approx((3 + 1 + 2 + 3) / 4)]
    assert np.isnan(got.ndcg[2]).all()  # nothing shared: no ideal gain
    summary = got.to_dict()
    assert summary["NDCG_queries@1"] == 2 and summary["mistake_queries@1"] == 3
    assert summary["mistake_severity@1"] == pytest.approx((3 + 3 + 3) / 3)


def test_a_perfect_ranking_scores_one_and_makes_no_mistake_at_one():
    leaves = np.arange(18)
    g_lab = _tree_labels(np.repeat(leaves, 2))
    g = np.repeat(np.eye(18), 2, axis=0)
    got = ranking_metrics(np.eye(18), g, _tree_labels(leaves), g_lab, ks=(1, 2))
    assert np.allclose(got.ndcg, 1.0)
    assert np.isnan(got.mistake_severity).all()  # the top two are the query's own leaf


def test_a_distance_of_ones_own_and_the_poincare_ball():
    rng = np.random.default_rng(5)
    q, g = rng.uniform(-0.3, 0.3, size=(8, 3)), rng.uniform(-0.3, 0.3, size=(30, 3))
    q_lab, g_lab = _tree_labels(rng.integers(0, 18, 8)), _tree_labels(rng.integers(0, 18, 30))
    got = ranking_metrics(q, g, q_lab, g_lab, ks=(1, 5), distance="poincare")
    x2, y2 = (q * q).sum(1)[:, None], (g * g).sum(1)[None]
    d = np.arccosh(1 + 2 * ((q[:, None] - g[None]) ** 2).sum(-1) / ((1 - x2) * (1 - y2)))
    _check(got, d, q_lab, g_lab, (1, 5), "exp")
    assert np.allclose(poincare(1.0)(q, g), d)
    mine = ranking_metrics(q, g, q_lab, g_lab, ks=(1, 5), distance=lambda a, b: -a @ b.T)
    _check(mine, -q @ g.T, q_lab, g_lab, (1, 5), "exp")


def test_bad_inputs_say_what_is_wrong():
    q, lab = np.zeros((2, 3)), np.zeros((2, 3), dtype=int)
    with pytest.raises(ValueError, match=r"query_labels must be \[2, K\]"):
        ranking_metrics(q, q, lab[:1], lab)
    with pytest.raises(ValueError, match="must be integer codes"):
        ranking_metrics(q, q, lab.astype(float), lab)
    with pytest.raises(ValueError, match="ks must be distinct positive integers"):
        ranking_metrics(q, q, lab, lab, ks=(0,))
    with pytest.raises(ValueError, match="unknown gain 'log'"):
        ranking_metrics(q, q, lab, lab, gain="log")
    with pytest.raises(ValueError, match="unknown distance 'cosine'"):
        ranking_metrics(q, q, lab, lab, distance="cosine")
    with pytest.raises(ValueError, match="inside the ball"):
        ranking_metrics(q + 2.0, q, lab, lab, distance="poincare")


def test_the_readme_example_runs_as_written():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Hierarchical metrics as a library", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    m = namespace["m"]
    assert set(m.to_dict()) >= {"NDCG@1", "NDCG@5", "mistake_severity@1", "mistake_severity@5"}
    assert -1.0 <= namespace["cpcc"](namespace["x"], namespace["labels"]) <= 1.0
