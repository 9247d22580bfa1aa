"""`hierconsole.metrics.evaluate` against independent plain loops in float64, written out from each metric's
definition (rank by sorting (distance, index), then loop over ranks): random trees of 2 to 7 levels,
distance ties, galleries smaller than k, one-item galleries, queries with no positive at a level or
nothing shared, chunking and threads; H-AP, ASI and NDCG against HAPPIER's own code on shared fixtures;
strict mAP and Recall@k against the study's engine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hierconsole.metrics import HIERARCHY, evaluate
from hierconsole.metrics.ranking import rank_order, ranked_heights

ALL = ("mAP", "R@1", "R@3", "R@100", "H-AP", "ASI", "NDCG@1", "NDCG@5", "NDCG@100", "mistake_severity@1",
       "mistake_severity@5")


def _height(a, b) -> int:
    for level, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y:
            return level
    return len(a)


def _nan_or(values, f):
    return f(values) if values else math.nan


def _reference(d, q_lab, g_lab, *, gain="exp", relevance="pop", alpha=1.0):
    """{metric: per-query values} ({"mAP": [Q][K], ...}) from the definitions, one query at a time."""
    K = len(q_lab[0])
    gain_of = (lambda r: 2.0**r - 1.0) if gain == "exp" else float
    out: dict[str, list] = {name: [] for name in ALL}
    for qi, row in enumerate(d):
        ranked = sorted(range(len(row)), key=lambda j: (row[j], j))
        hs = [_height(q_lab[qi], g_lab[j]) for j in ranked]  # tree distance at rank 1, 2, ...
        # strict per level
        aps, recalls = [], {1: [], 3: [], 100: []}
        for level in range(K):
            pos = [i + 1 for i, h in enumerate(hs) if h == level]
            aps.append(_nan_or(pos, lambda p: sum((n + 1) / r for n, r in enumerate(p)) / len(p)))
            for k in recalls:
                recalls[k].append(_nan_or(pos, lambda p, k=k: float(p[0] <= k)))
        out["mAP"].append(aps)
        for k, v in recalls.items():
            out[f"R@{k}"].append(v)
        # H-AP (HAPPIER): relevance of depth s = K - h
        n_at = [hs.count(h) for h in range(K + 1)]
        def rel(h, n_at=n_at):
            if h == K:
                return 0.0
            if relevance == "pop":
                return ((K - h) / K) ** alpha / n_at[h]
            return sum((1 / K) / sum(n_at[: hp + 1]) for hp in range(h, K))
        rels = [rel(h) for h in hs]
        total = sum(rels)
        hap = 0.0
        for i, r in enumerate(rels):
            if r > 0:
                hrank = sum(min(r, rels[j]) for j in range(i + 1) if rels[j] > 0)
                hap += hrank / (i + 1)
        out["H-AP"].append(hap / total if total > 0 else math.nan)
        # ASI at R
        ideal = sorted(hs)
        R = sum(1 for h in hs if h < K)
        si = 0.0
        for n in range(1, R + 1):
            si += sum(min(hs[:n].count(h), ideal[:n].count(h)) for h in range(K)) / n
        out["ASI"].append(si / R if R else math.nan)
        # NDCG@k and mistake severity@k
        for k in (1, 5, 100):
            dcg = sum(gain_of(K - h) / math.log2(i + 2) for i, h in enumerate(hs[:k]))
            idcg = sum(gain_of(K - h) / math.log2(i + 2) for i, h in enumerate(ideal[:k]))
            out[f"NDCG@{k}"].append(dcg / idcg if idcg > 0 else math.nan)
        for k in (1, 5):
            mistakes = [h for h in hs[:k] if h > 0]
            out[f"mistake_severity@{k}"].append(_nan_or(mistakes, lambda m: sum(m) / len(m)))
    return {name: np.array(v, dtype=np.float64) for name, v in out.items()}


def _check(got, want):
    for name, values in want.items():
        mine = got.per_level[name] if name in got.per_level else got.per_query[name]
        assert np.array_equal(np.isnan(mine), np.isnan(values)), name
        assert np.allclose(mine, values, rtol=0, atol=1e-9, equal_nan=True), name


def _tree(leaves: np.ndarray, levels: int, branching: int = 2) -> np.ndarray:
    return np.stack([leaves // branching**level for level in range(levels)], axis=1)


def _euclidean(x, y):
    return np.sqrt(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))


@pytest.mark.parametrize("levels", [2, 3, 5, 7])
@pytest.mark.parametrize(("gain", "relevance", "alpha"), [("exp", "pop", 1.0), ("linear", "map", 1.0), ("exp", "pop", 2.5)])
def test_random_trees_equal_the_plain_loops(levels, gain, relevance, alpha):
    rng = np.random.default_rng(levels)
    n_leaves = 2 ** (levels + 1)
    q_lab, g_lab = _tree(rng.integers(0, n_leaves, 30), levels), _tree(rng.integers(0, n_leaves, 70), levels)
    q, g = rng.normal(size=(30, 4)), rng.normal(size=(70, 4))
    got = evaluate(q, g, q_lab, g_lab, metrics=ALL, gain=gain, relevance=relevance, alpha=alpha)
    want = _reference(_euclidean(q, g).tolist(), q_lab.tolist(), g_lab.tolist(), gain=gain, relevance=relevance, alpha=alpha)
    _check(got, want)
    # A row per chunk, on two threads: bit for bit the same.
    small = evaluate(q, g, q_lab, g_lab, metrics=ALL, gain=gain, relevance=relevance, alpha=alpha, memory_budget=1, workers=2)
    for name in got.per_level:
        assert np.array_equal(small.per_level[name], got.per_level[name], equal_nan=True)
    for name in got.per_query:
        assert np.array_equal(small.per_query[name], got.per_query[name], equal_nan=True)


def test_ties_follow_the_gallery_order_and_undefined_queries_are_left_out():
    # Coordinates of one decimal and duplicated rows: many equal distances, ranked by gallery index.
    rng = np.random.default_rng(11)
    g = np.round(rng.normal(size=(40, 2)), 1)
    g[10:16] = g[3]
    q = np.concatenate([g[3:4], np.round(rng.normal(size=(9, 2)), 1)])
    g_lab = _tree(rng.integers(0, 16, 40), 3)
    q_lab = _tree(rng.integers(0, 16, 10), 3)
    q_lab[-1] = [100, 100, 100]  # shares nothing with the gallery: every graded metric NaN, every level invalid

    def squared(x, y):  # exact on one-decimal coordinates' ties, like the reference's
        return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)

    got = evaluate(q, g, q_lab, g_lab, metrics=ALL, geometry=squared)
    _check(got, _reference(squared(q, g).tolist(), q_lab.tolist(), g_lab.tolist()))
    assert np.isnan(got.per_level["mAP"][-1]).all() and np.isnan(got.per_query["H-AP"][-1])
    assert got.defined()[0]["mAP"] < 10


def test_a_one_item_gallery_and_a_gallery_smaller_than_k():
    q, g = np.array([[0.0], [1.0], [5.0]]), np.array([[0.5]])
    q_lab = np.array([[0, 0, 0], [1, 0, 0], [2, 1, 1]])
    g_lab = np.array([[0, 0, 0]])
    got = evaluate(q, g, q_lab, g_lab, metrics=ALL)
    _check(got, _reference(_euclidean(q, g).tolist(), q_lab.tolist(), g_lab.tolist()))
    assert got.per_level["mAP"][0].tolist()[0] == 1.0 and got.per_query["NDCG@100"][1] == 1.0


def test_happier_s_own_code_on_shared_fixtures():
    fixtures = json.loads((Path(__file__).parent / "happier_fixtures.json").read_text())

    def squared(x, y):  # the fixtures' ranking: squared Euclidean distance, ties by gallery index
        return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)

    for case in fixtures["cases"]:
        g = np.array(case["gallery"])
        got = evaluate(
            np.array(case["query"]), g, np.array(case["query_labels"]), np.array(case["gallery_labels"]),
            metrics=("H-AP", "ASI", f"NDCG@{len(g)}"), geometry=squared, relevance=case["relevance"],
            alpha=case["alpha"],
        )
        for mine, theirs in ((got.per_query["H-AP"], case["hap"]), (got.per_query["ASI"], case["asi"]),
                             (got.per_query[f"NDCG@{len(g)}"], case["ndcg"])):
            want = np.array([math.nan if v is None else v for v in theirs])
            assert np.allclose(mine, want, rtol=0, atol=1e-12, equal_nan=True), case["levels"]


def test_strict_metrics_equal_the_study_engine():
    torch = pytest.importorskip("torch")
    from hierconsole.engine.geometry import Euclidean
    from hierconsole.engine.retrieval import evaluate as engine_evaluate

    rng = np.random.default_rng(2)
    q_lab, g_lab = _tree(rng.integers(0, 40, 50), 4), _tree(rng.integers(0, 40, 300), 4)
    q, g = rng.normal(size=(50, 6)), rng.normal(size=(300, 6))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    mine = evaluate(q, g, q_lab, g_lab, metrics=("mAP", "R@1", "R@5"))
    engine = engine_evaluate(torch.from_numpy(q), torch.from_numpy(g), q_lab, g_lab, Euclidean(), ks=(1, 5))
    for aggregate in ("micro", "macro"):
        theirs = engine.aggregate(aggregate)
        ours = mine.to_dict(aggregate)
        for level, code in enumerate(engine.level_codes):
            for name in ("mAP", "R@1", "R@5"):
                assert ours[level][name] == pytest.approx(theirs[code][name], abs=1e-12)
            assert mine.defined(aggregate)[level]["mAP"] == theirs[code].get("groups", theirs[code]["valid_queries"])


def test_torch_tensors_score_as_their_arrays():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    lab = _tree(rng.integers(0, 16, 60), 3)
    x = rng.normal(size=(60, 3)).astype(np.float32)
    a = evaluate(x[:10], x[10:], lab[:10], lab[10:], metrics=ALL)
    b = evaluate(torch.from_numpy(x[:10]), torch.from_numpy(x[10:]), torch.from_numpy(lab[:10]), torch.from_numpy(lab[10:]), metrics=ALL)
    assert a.to_dict() == b.to_dict()


def test_the_packed_float32_ranking_equals_the_argsort_reference():
    rng = np.random.default_rng(9)
    d = np.round(rng.normal(size=(20, 500)), 1).astype(np.float32)  # many ties, negatives
    d[0, :5] = [np.nan, -0.0, 0.0, np.inf, -np.inf]
    heights = rng.integers(0, 13, size=d.shape).astype(np.uint8)
    packed = ranked_heights(d, heights)
    assert packed.dtype == np.int64  # the packed path: its low four bits
    reference = np.take_along_axis(heights, rank_order(d), axis=1)
    assert np.array_equal(packed & 0xF, reference)
    assert np.array_equal(ranked_heights(d.astype(np.float64), heights), reference)


def test_macro_averages_each_group_then_the_groups():
    rng = np.random.default_rng(6)
    q_lab, g_lab = _tree(rng.integers(0, 8, 40), 3), _tree(rng.integers(0, 8, 50), 3)
    q, g = rng.normal(size=(40, 2)), rng.normal(size=(50, 2))
    got = evaluate(q, g, q_lab, g_lab, metrics=("mAP", "H-AP", "CPCC"), aggregate="macro", level_names=("sp", "ge", "fa"))
    table = got.to_dict()
    for level, name in enumerate(("sp", "ge", "fa")):
        values = got.per_level["mAP"][:, level]
        groups = {}
        for v, code in zip(values, q_lab[:, level], strict=True):
            if not math.isnan(v):
                groups.setdefault(code, []).append(v)
        assert table[name]["mAP"] == pytest.approx(np.mean([np.mean(v) for v in groups.values()]), abs=1e-12)
        assert got.defined()[name]["mAP"] == len(groups)
    assert set(table) == {"sp", "ge", "fa", HIERARCHY}
    assert list(table[HIERARCHY]) == ["H-AP", "CPCC"]
    assert table[HIERARCHY]["CPCC"] == got.to_dict("micro")[HIERARCHY]["CPCC"]
    frame = got.to_polars()
    assert frame.columns == ["level", "metric", "value", "defined"] and frame.height == 5


def test_bad_inputs_say_what_is_wrong_before_any_work():
    q, lab = np.zeros((2, 3)), np.zeros((2, 3), dtype=int)
    cases = [
        (dict(metrics=("mAP", "R@0")), "unknown metric 'R@0'"),
        (dict(metrics=("HAP",)), "unknown metric 'HAP'"),
        (dict(metrics=("mAP", "mAP")), "'mAP' is named twice"),
        (dict(gain="log"), "unknown gain 'log'"),
        (dict(relevance="flat"), "unknown relevance 'flat'"),
        (dict(geometry="cosine"), "unknown distance 'cosine'"),
        (dict(level_names=("a", "b")), "level_names must name the 3 levels"),
        (dict(aggregate="mean"), "aggregate must be one of micro, macro"),
        (dict(metrics=("CPCC",)), "CPCC needs at least three leaf classes"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            evaluate(q, q, lab, lab, **kwargs)
    with pytest.raises(ValueError, match=r"query_labels must be \[2, K\]"):
        evaluate(q, q, lab[:1], lab)
    with pytest.raises(ValueError, match="must be integer codes"):
        evaluate(q, q, lab.astype(float), lab)
    with pytest.raises(ValueError, match="gallery row 1 holds a NaN"):
        evaluate(q, np.array([[0.0, 0, 0], [np.nan, 0, 0]]), lab, lab)
    not_a_tree = np.array([[0, 0, 0], [0, 1, 1]])
    with pytest.raises(ValueError, match="not a tree: level 0 code 0 has parent 0 in query row 0 and 1 in gallery row 1"):
        evaluate(q, q, lab, not_a_tree)
    with pytest.raises(ValueError, match="inside the ball"):
        evaluate(q + 2.0, q, lab, lab, geometry="poincare")


def test_the_poincare_ball_and_a_distance_of_ones_own():
    rng = np.random.default_rng(5)
    q, g = rng.uniform(-0.3, 0.3, size=(8, 3)), rng.uniform(-0.3, 0.3, size=(30, 3))
    q_lab, g_lab = _tree(rng.integers(0, 16, 8), 3), _tree(rng.integers(0, 16, 30), 3)
    x2, y2 = (q * q).sum(1)[:, None], (g * g).sum(1)[None]
    d = np.arccosh(1 + 2 * ((q[:, None] - g[None]) ** 2).sum(-1) / ((1 - x2) * (1 - y2)))
    _check(evaluate(q, g, q_lab, g_lab, metrics=ALL, geometry="poincare"), _reference(d.tolist(), q_lab.tolist(), g_lab.tolist()))
    _check(evaluate(q, g, q_lab, g_lab, metrics=ALL, geometry=lambda a, b: -a @ b.T), _reference((-q @ g.T).tolist(), q_lab.tolist(), g_lab.tolist()))


def test_the_readme_example_runs_as_written():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Hierarchical metrics as a library", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    table = namespace["r"].to_dict()
    assert set(table) == {"species", "genus", "family", HIERARCHY}
    assert set(table[HIERARCHY]) == {"H-AP", "ASI", "NDCG@10", "mistake_severity@1", "CPCC"}
    assert -1.0 <= table[HIERARCHY]["CPCC"] <= 1.0


def test_float32_results_are_the_same_bits_whatever_the_chunks_and_threads():
    # A BLAS product's last bits depend on its shape: the distances here are summed in one order per pair,
    # so a query ranks alike in a chunk of 1, of 7 or of all, on one thread or two.
    rng = np.random.default_rng(12)
    lab = _tree(rng.integers(0, 32, 700), 4)
    x = rng.normal(size=(700, 24)).astype(np.float32)
    runs = [
        evaluate(x[:100], x[100:], lab[:100], lab[100:], metrics=ALL, workers=w, memory_budget=b)
        for w, b in ((1, 10**9), (2, 1), (2, 7 * 32 * 600), (1, 1))
    ]
    for other in runs[1:]:
        for name, values in runs[0].per_level.items():
            assert np.array_equal(other.per_level[name], values, equal_nan=True), name
        for name, values in runs[0].per_query.items():
            assert np.array_equal(other.per_query[name], values, equal_nan=True), name
