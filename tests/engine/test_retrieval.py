"""Strict retrieval against a plain per-query loop and scikit-learn (paper S2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from hierconsole.engine.geometry import EVAL_CLIP, Euclidean, Poincare
from hierconsole.engine.retrieval import (
    DEFAULT_MEMORY_BUDGET,
    Unit,
    _strict_bits,
    chunk_rows,
    evaluate,
    evaluate_units,
    rank_order,
    strict_masks,
    unit_bytes,
)
from hierconsole.levels import PAPER_CODES as LEVELS
from tests.engine.oracles import evaluate_distances, pairwise_reference

KS = (1, 5, 10, 20)


def _labels(
    n: int, rng: np.random.Generator, leaves: int = 12, middles: int = 5, highs: int = 3
) -> np.ndarray:
    leaf_middle = np.arange(leaves) % middles
    middle_high = np.arange(middles) % highs
    leaf = rng.integers(0, leaves, n)
    return np.stack([leaf, leaf_middle[leaf], middle_high[leaf_middle[leaf]]], axis=1).astype(np.int64)


def _is_positive(q, g, level: int) -> bool:
    if level == 0:
        return q[0] == g[0]
    if level == 1:
        return q[1] == g[1] and q[0] != g[0]
    return q[2] == g[2] and q[1] != g[1]


def _loop_reference(dist: np.ndarray, q_labels: np.ndarray, g_labels: np.ndarray, ks=KS):
    """level -> {query index: (AP, [hit@K])} for valid queries, by the textbook definitions."""
    out = {}
    for level, name in enumerate(LEVELS):
        per_query = {}
        for qi in range(dist.shape[0]):
            ranked = sorted(
                range(dist.shape[1]), key=lambda j, qi=qi: (dist[qi, j], j)
            )  # ties: gallery index
            r = [1 if _is_positive(q_labels[qi], g_labels[j], level) else 0 for j in ranked]
            n_pos = sum(r)
            if n_pos == 0:
                continue
            ap = sum(sum(r[: k + 1]) / (k + 1) * r[k] for k in range(len(r))) / n_pos
            per_query[qi] = (ap, [any(r[:k]) for k in ks])
        out[name] = per_query
    return out


def _check_against_loop(evaluation, reference, ks=KS):
    for level in LEVELS:
        res = evaluation.levels[level]
        ref = reference[level]
        assert res.query_index.tolist() == sorted(ref)
        assert res.valid_queries == len(ref)
        np.testing.assert_allclose(res.ap, [ref[q][0] for q in res.query_index], rtol=1e-12, atol=0)
        assert res.hits.tolist() == [ref[q][1] for q in res.query_index]
        agg = evaluation.aggregate("micro")[level]
        assert agg["mAP"] == pytest.approx(np.mean([v[0] for v in ref.values()]), rel=1e-12)
        for i, k in enumerate(ks):
            assert agg[f"R@{k}"] == pytest.approx(np.mean([v[1][i] for v in ref.values()]), rel=1e-12)


def test_strict_masks_follow_definitions_and_are_mutually_exclusive():
    rng = np.random.default_rng(0)
    a, b = _labels(15, rng), _labels(40, rng)
    masks = strict_masks(torch.as_tensor(a), torch.as_tensor(b))
    assert masks.shape == (3, 15, 40) and masks.dtype == torch.bool
    for level in range(3):
        expected = [[_is_positive(a[i], b[j], level) for j in range(40)] for i in range(15)]
        assert masks[level].tolist() == expected
    assert (masks.sum(dim=0) <= 1).all()  # no pair is a positive at two levels
    same_high = torch.as_tensor(a[:, None, 2] == b[None, :, 2])
    assert torch.equal(masks.any(dim=0), same_high)  # together they partition the same-high pairs
    assert all(masks[level].any() for level in range(3))


@pytest.mark.parametrize("seed", range(3))
def test_matches_per_query_loop_with_ties(seed):
    rng = np.random.default_rng(seed)
    q_labels, g_labels = _labels(25, rng), _labels(60, rng)
    dist = rng.integers(0, 6, size=(25, 60)).astype(np.float64)  # many exact ties
    q_labels[0] = [99, 98, 97]  # a query with no positive at any level
    evaluation = evaluate_distances(torch.as_tensor(dist), q_labels, g_labels)
    reference = _loop_reference(dist, q_labels, g_labels)
    _check_against_loop(evaluation, reference)
    assert all(0 not in evaluation.levels[level].query_index for level in LEVELS)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ap_matches_sklearn_at_every_level(seed, dtype):
    rng = np.random.default_rng(10 + seed)
    q_labels, g_labels = _labels(30, rng), _labels(80, rng)
    dist = torch.as_tensor(rng.random((30, 80)), dtype=dtype)  # continuous: no ties
    evaluation = evaluate_distances(dist, q_labels, g_labels)
    masks = strict_masks(torch.as_tensor(q_labels), torch.as_tensor(g_labels)).numpy()
    for level, name in enumerate(LEVELS):
        res = evaluation.levels[name]
        valid = np.flatnonzero(masks[level].any(axis=1))
        assert res.query_index.tolist() == valid.tolist()
        expected = [average_precision_score(masks[level][q], -dist[q].double().numpy()) for q in valid]
        np.testing.assert_allclose(res.ap, expected, rtol=1e-12)
        assert res.n_positives.tolist() == masks[level][valid].sum(axis=1).tolist()


@pytest.mark.parametrize(
    "geometry",
    [Euclidean(), Poincare(c=2.0, r=0.4), Poincare(c=0.1, r=0.4)],
    ids=["euclidean", "poincare-2", "poincare-0.1"],
)
def test_evaluate_ranks_by_the_geometry_distance(geometry):
    rng = np.random.default_rng(20)
    q_labels, g_labels = _labels(20, rng), _labels(70, rng)
    g = torch.Generator().manual_seed(20)
    query = geometry.embed(torch.randn(20, 6, generator=g, dtype=torch.float64))
    gallery = geometry.embed(torch.randn(70, 6, generator=g, dtype=torch.float64))
    evaluation = evaluate(query, gallery, q_labels, g_labels, geometry)
    dist = pairwise_reference(geometry, query, gallery, clip_max=EVAL_CLIP).numpy()  # geoopt for Poincaré
    _check_against_loop(evaluation, _loop_reference(dist, q_labels, g_labels))
    assert evaluation.n_queries == 20 and evaluation.n_gallery == 70


def test_chunked_equals_unchunked():
    rng = np.random.default_rng(30)
    q_labels, g_labels = _labels(37, rng), _labels(90, rng)
    query = torch.randn(37, 5, generator=torch.Generator().manual_seed(30))
    gallery = torch.randn(90, 5, generator=torch.Generator().manual_seed(31))
    geometry = Poincare(c=2.0, r=0.4)
    query, gallery = geometry.embed(query), geometry.embed(gallery)
    results = [
        evaluate(query, gallery, q_labels, g_labels, geometry, chunk_size=size)
        for size in (None, 1, 7, 37, 100)
    ]
    results.append(evaluate(query, gallery, q_labels, g_labels, geometry, memory_budget=1))  # one row a chunk
    # distances in blocks of two 3-row chunks (the last block and chunk partial)
    results.append(evaluate(query, gallery, q_labels, g_labels, geometry, chunk_size=3, memory_budget=8640))
    for other in results[1:]:
        for level in LEVELS:
            a, b = results[0].levels[level], other.levels[level]
            assert np.array_equal(a.query_index, b.query_index)
            assert np.array_equal(a.ap, b.ap)
            assert np.array_equal(a.hits, b.hits)


def test_ties_are_broken_by_gallery_index():
    # all distances equal: the ranking is the gallery order
    q_labels = np.array([[0, 0, 0]])
    g_labels = np.array([[1, 0, 0], [0, 0, 0], [2, 1, 0], [0, 0, 0], [3, 9, 9]])
    evaluation = evaluate_distances(torch.zeros(1, 5), q_labels, g_labels, ks=(1, 2))
    leaf = evaluation.levels["leaf"]  # positives at ranks 2 and 4
    assert leaf.ap.tolist() == [pytest.approx((1 / 2 + 2 / 4) / 2)]
    assert leaf.hits.tolist() == [[False, True]]
    middle = evaluation.levels["middle"]  # rank 1
    assert middle.ap.tolist() == [1.0] and middle.hits.tolist() == [[True, True]]
    high = evaluation.levels["high"]  # rank 3
    assert high.ap.tolist() == [pytest.approx(1 / 3)] and high.hits.tolist() == [[False, False]]
    # reversing the gallery reverses the tie order, so the result changes: ties are not averaged
    rev = evaluate_distances(torch.zeros(1, 5), q_labels, g_labels[::-1].copy(), ks=(1, 2))
    assert rev.levels["high"].ap.tolist() == [pytest.approx(1 / 3)]
    assert rev.levels["middle"].ap.tolist() == [pytest.approx(1 / 5)]  # now last of five


def test_group_macro_differs_from_query_micro_on_a_hand_computed_case():
    # leaf level: three queries of leaf 0 retrieve their positive first (AP 1); one query of leaf 1 finds
    # its positive second (AP 1/2). micro = (1 + 1 + 1 + 1/2) / 4 = 0.875; macro = (1 + 1/2) / 2 = 0.75.
    q_labels = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 1, 1]])
    g_labels = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]])
    dist = torch.tensor(
        [
            [0.1, 0.5, 0.9],
            [0.2, 0.6, 0.9],
            [0.3, 0.4, 0.9],
            [0.9, 0.5, 0.1],  # leaf-1 query: the other item comes first, its positive second
        ]
    )
    evaluation = evaluate_distances(dist, q_labels, g_labels, ks=(1, 2))
    micro = evaluation.aggregate("micro")["leaf"]
    macro = evaluation.aggregate("macro")["leaf"]
    assert micro == {"mAP": 0.875, "R@1": 0.75, "R@2": 1.0, "valid_queries": 4}
    assert macro == {"mAP": 0.75, "R@1": 0.5, "R@2": 1.0, "valid_queries": 4, "groups": 2}
    # no strict middle or high positives exist: those levels have no valid query
    for level in ("middle", "high"):
        for how in ("micro", "macro"):
            agg = evaluation.aggregate(how)[level]
            assert agg["valid_queries"] == 0 and math.isnan(agg["mAP"]) and math.isnan(agg["R@1"])
        assert evaluation.aggregate("macro")[level]["groups"] == 0


def test_macro_against_plain_group_means():
    rng = np.random.default_rng(40)
    q_labels, g_labels = _labels(50, rng), _labels(120, rng)
    dist = rng.random((50, 120))
    evaluation = evaluate_distances(torch.as_tensor(dist), q_labels, g_labels)
    reference = _loop_reference(dist, q_labels, g_labels)
    macro = evaluation.aggregate("macro")
    for level, name in enumerate(LEVELS):
        groups: dict[int, list[float]] = {}
        for q, (ap, _) in reference[name].items():
            groups.setdefault(int(q_labels[q, level]), []).append(ap)
        assert macro[name]["groups"] == len(groups)
        assert macro[name]["mAP"] == pytest.approx(np.mean([np.mean(v) for v in groups.values()]), rel=1e-12)
        assert list(macro[name]) == ["mAP", "R@1", "R@5", "R@10", "R@20", "valid_queries", "groups"]


def test_flat_metric_names():
    rng = np.random.default_rng(50)
    q_labels, g_labels = _labels(20, rng), _labels(40, rng)
    evaluation = evaluate_distances(torch.as_tensor(rng.random((20, 40))), q_labels, g_labels)
    flat = evaluation.flat("micro")
    agg = evaluation.aggregate("micro")
    assert set(flat) == {f"{lv}_{m}" for lv in LEVELS for m in ("mAP", "R@1", "R@5", "R@10", "R@20")} | {
        "hier_mAP"
    }
    assert flat["hier_mAP"] == pytest.approx((agg["middle"]["mAP"] + agg["high"]["mAP"]) / 2)
    assert flat["leaf_R@5"] == agg["leaf"]["R@5"]


def test_chunk_size_respects_the_memory_budget():
    assert chunk_rows(5_000) * 5_000 * 64 <= DEFAULT_MEMORY_BUDGET
    assert 1 <= chunk_rows(1_000_000) <= 16
    assert chunk_rows(10**9) == 1


def test_bad_inputs():
    with pytest.raises(ValueError, match="label rows"):
        evaluate_distances(
            torch.zeros(3, 4), np.zeros((2, 3), dtype=np.int64), np.zeros((4, 3), dtype=np.int64)
        )
    with pytest.raises(ValueError, match="integers"):
        evaluate_distances(torch.zeros(1, 1), np.zeros((1, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="ks"):
        evaluate_distances(torch.zeros(1, 1), np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64), ks=(0,))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_matches_cpu():
    rng = np.random.default_rng(60)
    q_labels, g_labels = _labels(40, rng), _labels(300, rng)
    geometry = Poincare(c=2.0, r=0.4)
    query = geometry.embed(torch.randn(40, 8, generator=torch.Generator().manual_seed(60)))
    gallery = geometry.embed(torch.randn(300, 8, generator=torch.Generator().manual_seed(61)))
    cpu = evaluate(query, gallery, q_labels, g_labels, geometry)
    gpu = evaluate(query.cuda(), gallery.cuda(), q_labels, g_labels, geometry, chunk_size=7)
    for level in LEVELS:
        assert np.array_equal(cpu.levels[level].query_index, gpu.levels[level].query_index)
        np.testing.assert_allclose(cpu.levels[level].ap, gpu.levels[level].ap, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rank_order_is_a_stable_ascending_sort(dtype):
    g = torch.Generator().manual_seed(70)
    d = (torch.randint(-4, 5, (30, 200), generator=g) * 0.5).to(dtype)  # ties, negatives, zeros
    zeros = d == 0
    d[zeros] = torch.where(torch.rand(int(zeros.sum()), generator=g) < 0.5, 0.0, -0.0).to(
        dtype
    )  # -0.0 ties +0.0
    nan = float("nan")
    d[0, :8] = torch.tensor([float("inf"), float("-inf"), 1e-45, -1e-45, 3e38, -3e38, nan, nan], dtype=dtype)
    d[0, 7] = -d[0, 7]  # a NaN with the sign bit set
    order = rank_order(d)
    for row in range(30):
        values = [float("inf") if math.isnan(v) else v for v in d[row].tolist()]  # NaN ranks last
        assert order[row].tolist() == sorted(range(200), key=lambda j, v=values: (v[j], j))


@pytest.mark.parametrize("offset", [0, 2**40])  # labels beyond int32 take the int64 comparison
def test_packed_strict_bits_are_the_strict_masks(offset):
    # Independent columns: inconsistent hierarchies too (a shared leaf under different middles).
    g = torch.Generator().manual_seed(71)
    q_labels = torch.randint(0, 4, (37, 3), generator=g) + offset
    g_labels = torch.randint(0, 4, (53, 3), generator=g) + offset
    bits = _strict_bits(q_labels, g_labels)
    masks = strict_masks(q_labels, g_labels)
    assert bits.dtype == torch.uint8 and bits.shape == (37, 53)
    for level in range(3):
        assert torch.equal((bits & (1 << level)) != 0, masks[level])
    assert int(bits.max()) < 8


def _units(n_models: int = 4, n_perturbations: int = 3, n: int = 160, n_query: int = 40) -> list[Unit]:
    # One test set, several models (both geometries) and several Q/G draws of it, as in an evaluate job;
    # a few duplicated embeddings give exact distance ties.
    rng = np.random.default_rng(7)
    labels = _labels(n, rng)
    draws = [rng.permutation(n) for _ in range(n_perturbations)]
    units = []
    for m in range(n_models):
        geometry = Euclidean() if m % 2 == 0 else Poincare(c=1.5, r=0.5)
        z = geometry.embed(torch.from_numpy(rng.normal(size=(n, 8)).astype(np.float32)))
        z[5] = z[9]
        for p, order in enumerate(draws):
            q, g = order[:n_query], order[n_query:]
            units.append(Unit(z[q], z[g], labels[q], labels[g], geometry, labels_key=p))
    return units


def _identical(a, b) -> None:
    assert (a.ks, a.n_queries, a.n_gallery) == (b.ks, b.n_queries, b.n_gallery)
    for level in LEVELS:
        x, y = a.levels[level], b.levels[level]
        for field in ("query_index", "ap", "hits", "groups", "n_positives"):
            u, v = getattr(x, field), getattr(y, field)
            assert u.dtype == v.dtype and np.array_equal(u, v), (level, field)  # bit for bit, not approximately
    for how in ("micro", "macro"):
        assert repr(a.aggregate(how)) == repr(b.aggregate(how))


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_parallel_units_equal_the_sequential_reference_bit_for_bit(workers):
    units = _units()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = [evaluate(u.query_emb, u.gallery_emb, u.q_labels, u.g_labels, u.geometry) for u in units]
    finally:
        torch.set_num_threads(threads)
    results = list(evaluate_units(units, workers=workers))
    assert len(results) == len(units)
    for r, ref in zip(results, reference, strict=True):
        _identical(r, ref)
    assert torch.get_num_threads() == threads  # the scoring's one intra-op thread is put back


def test_parallel_units_with_small_chunks_and_no_shared_positives():
    # A memory budget that forces many chunks and blocks, a bound that admits two units in flight and
    # shares no positives, and units without a labels_key: still the reference, unit by unit.
    units = _units(n_models=2)
    budget = 64 * 120 * 7
    bound = 2 * unit_bytes(40, 120, budget)
    plain = [Unit(u.query_emb, u.gallery_emb, u.q_labels, u.g_labels, u.geometry) for u in units]
    torch.set_num_threads(1)
    reference = [
        evaluate(u.query_emb, u.gallery_emb, u.q_labels, u.g_labels, u.geometry, memory_budget=budget)
        for u in units
    ]
    for batch in (units, plain):
        results = evaluate_units(batch, workers=2, memory_budget=budget, max_in_flight=bound)
        for r, ref in zip(results, reference, strict=True):
            _identical(r, ref)


def test_units_in_flight_stay_within_the_memory_bound():
    # 10^6 gallery items: one unit's temporaries are about the whole default budget, so two are never
    # scored at once under the default bound, whatever the requested width.
    one = unit_bytes(870, 10**6)
    assert one <= DEFAULT_MEMORY_BUDGET * 1.5
    assert 2 * one > 2 * DEFAULT_MEMORY_BUDGET
    assert unit_bytes(870, 4924) * 3 <= 2 * DEFAULT_MEMORY_BUDGET  # CUB-sized units: three side by side


def test_evaluate_units_rejects_mismatched_units():
    u = _units(n_models=1, n_perturbations=1)[0]
    with pytest.raises(ValueError, match="label rows"):
        list(evaluate_units([Unit(u.query_emb, u.gallery_emb, u.q_labels[:-1], u.g_labels, u.geometry)]))
    with pytest.raises(ValueError, match=r"\[Q, D\]"):
        list(evaluate_units([Unit(u.query_emb[:, :3], u.gallery_emb, u.q_labels, u.g_labels, u.geometry)]))


# -- any depth (K = 2 .. 12) ----------------------------------------------------------------------------


def _deep_labels(n: int, k: int, rng: np.random.Generator, n_leaves: int = 40) -> np.ndarray:
    """[n, K] labels of a random K-level tree: each level's nodes get a random parent one level up."""
    counts = [max(2, round(n_leaves * 0.75**lvl)) for lvl in range(k)]
    parents = [rng.integers(0, counts[lvl + 1], counts[lvl]) for lvl in range(k - 1)]
    cols = [rng.integers(0, n_leaves, n)]
    for p in parents:
        cols.append(p[cols[-1]])
    return np.stack(cols, axis=1).astype(np.int64)


def _deep_reference(dist: np.ndarray, q: np.ndarray, g: np.ndarray, ks=KS):
    """level index -> {query: (AP, [hit@K])} by the definition, one query and one gallery item at a time."""
    k_levels = q.shape[1]

    def positive(a, b, lvl):
        return a[lvl] == b[lvl] and (lvl == 0 or a[lvl - 1] != b[lvl - 1])

    out = []
    for lvl in range(k_levels):
        per_query = {}
        for qi in range(dist.shape[0]):
            ranked = sorted(range(dist.shape[1]), key=lambda j, qi=qi: (dist[qi, j], j))
            r = [positive(q[qi], g[j], lvl) for j in ranked]
            n_pos = sum(r)
            if n_pos:
                found, ap = 0, 0.0
                for rank, is_pos in enumerate(r, start=1):
                    if is_pos:
                        found += 1
                        ap += found / rank
                per_query[qi] = (ap / n_pos, [any(r[:kk]) for kk in ks])
        out.append(per_query)
    return out


def _check_deep(evaluation, reference, q_labels, levels, ks=KS):
    assert tuple(evaluation.levels) == levels.codes
    micro, macro = evaluation.aggregate("micro"), evaluation.aggregate("macro")
    for lvl, code in enumerate(levels.codes):
        res, ref = evaluation.levels[code], reference[lvl]
        assert res.query_index.tolist() == sorted(ref)
        np.testing.assert_allclose(res.ap, [ref[q][0] for q in res.query_index], rtol=1e-12, atol=0)
        assert res.hits.tolist() == [ref[q][1] for q in res.query_index]
        assert micro[code]["valid_queries"] == macro[code]["valid_queries"] == len(ref)
        if not ref:
            assert math.isnan(micro[code]["mAP"]) and macro[code]["groups"] == 0
            continue
        assert micro[code]["mAP"] == pytest.approx(np.mean([v[0] for v in ref.values()]), rel=1e-12)
        groups: dict[int, list] = {}
        for qi, v in ref.items():
            groups.setdefault(int(q_labels[qi, lvl]), []).append(v)
        assert macro[code]["groups"] == len(groups)
        group_ap = [np.mean([v[0] for v in members]) for members in groups.values()]
        assert macro[code]["mAP"] == pytest.approx(np.mean(group_ap), rel=1e-12)
        for i, kk in enumerate(ks):
            assert micro[code][f"R@{kk}"] == pytest.approx(np.mean([v[1][i] for v in ref.values()]), rel=1e-12)
            group_r = [np.mean([v[1][i] for v in members]) for members in groups.values()]
            assert macro[code][f"R@{kk}"] == pytest.approx(np.mean(group_r), rel=1e-12)


@pytest.mark.parametrize("k", [2, 5, 12])
def test_strict_metrics_of_k_levels_equal_a_plain_loop_on_every_path(k):
    from hierconsole.engine.retrieval import _strict_bits_torch
    from hierconsole.levels import Levels

    rng = np.random.default_rng(100 + k)
    q_labels, g_labels = _deep_labels(33, k, rng), _deep_labels(301, k, rng)
    q_labels[0] = 10**6 + np.arange(k)  # a query with no positive at any level
    dist = rng.integers(0, 40, size=(33, 301)).astype(np.float64)  # exact ties, broken by gallery index
    reference = _deep_reference(dist, q_labels, g_labels)
    assert sum(bool(r) for r in reference) >= min(k, 4)  # most levels have valid queries
    levels = Levels.default(k)
    qt, gt = torch.as_tensor(q_labels), torch.as_tensor(g_labels)

    # chunks of 7 query rows and distance blocks of 14 (a budget this small) cross the chunk boundaries
    small_budget = 2 * 8 * 301 * 7 * 2
    paths = {
        # float32 on CPU: NumPy strict bits and the packed one-sort ranking
        "numpy": dict(dist=torch.as_tensor(dist, dtype=torch.float32)),
        # float64: torch's stable argsort and gather
        "torch-sort": dict(dist=torch.as_tensor(dist)),
        # the accelerators' strict bits (torch), ranked both ways
        "torch-bits": dict(dist=torch.as_tensor(dist), bits_for=lambda a, b: _strict_bits_torch(qt[a:b], gt)),
        "torch-bits-packed": dict(
            dist=torch.as_tensor(dist, dtype=torch.float32), bits_for=lambda a, b: _strict_bits_torch(qt[a:b], gt)
        ),
    }
    for path in paths.values():
        for chunk, budget in ((None, DEFAULT_MEMORY_BUDGET), (7, small_budget)):
            evaluation = evaluate_distances(
                path["dist"],
                q_labels,
                g_labels,
                chunk_size=chunk,
                memory_budget=budget,
                levels=levels,
                bits_for=path.get("bits_for"),
            )
            _check_deep(evaluation, reference, q_labels, levels)


@pytest.mark.parametrize("k", [2, 5, 8, 9, 12])
def test_packed_strict_bits_of_k_levels_are_the_strict_masks(k):
    from hierconsole.engine.retrieval import _packed_rank_bits, _sortable_keys, _strict_bits_torch

    g = torch.Generator().manual_seed(k)
    q_labels = torch.randint(0, 3, (21, k), generator=g)  # not a tree: levels may overlap
    g_labels = torch.randint(0, 3, (45, k), generator=g)
    masks = strict_masks(q_labels, g_labels)
    assert masks.shape == (k, 21, 45)
    for bits in (_strict_bits(q_labels, g_labels), _strict_bits_torch(q_labels, g_labels)):
        for level in range(k):
            assert torch.equal((bits & (1 << level)) != 0, masks[level])
        assert int(bits.max()) < 2**k
    bits = _strict_bits(q_labels, g_labels)
    dist = torch.randint(0, 5, (21, 45), generator=g).to(torch.float32)
    packed = _packed_rank_bits(_sortable_keys(dist.numpy()), bits.numpy(), k)
    assert torch.equal(torch.from_numpy(packed), bits.gather(1, rank_order(dist)))


def test_evaluation_names_its_levels_and_scores_the_declared_hier_levels():
    from hierconsole.levels import Levels

    rng = np.random.default_rng(5)
    q_labels, g_labels = _deep_labels(30, 5, rng), _deep_labels(90, 5, rng)
    levels = Levels.of(["Species", "Genus", "Family", "Order", "Class"])
    geometry = Euclidean()
    query = torch.randn(30, 4, generator=torch.Generator().manual_seed(1))
    gallery = torch.randn(90, 4, generator=torch.Generator().manual_seed(2))
    evaluation = evaluate(query, gallery, q_labels, g_labels, geometry, levels=levels)
    assert evaluation.taxonomy == levels
    assert list(evaluation.aggregate("micro")) == ["species", "genus", "family", "order", "class"]
    agg = evaluation.aggregate("micro")
    flat = evaluation.flat("micro")
    assert list(flat)[:2] == ["species_mAP", "species_R@1"] and list(flat)[-1] == "hier_mAP"
    expected = 0.0
    for code in ("genus", "family", "order", "class"):
        expected += agg[code]["mAP"]
    assert flat["hier_mAP"] == expected / 4  # default: every level above the leaf, summed in level order
    declared = evaluation.flat("micro", hier=("genus", "family"))
    assert declared["hier_mAP"] == (0.0 + agg["genus"]["mAP"] + agg["family"]["mAP"]) / 2
    units = [Unit(query, gallery, q_labels, g_labels, geometry, levels=levels)]
    (unit_eval,) = evaluate_units(units)
    assert unit_eval.flat("micro") == flat
    # without levels: the default levels of the depth
    assert tuple(evaluate(query, gallery, q_labels, g_labels, geometry).levels) == Levels.default(5).codes


def test_labels_of_another_depth_are_refused():
    from hierconsole.levels import Levels

    q = np.zeros((2, 4), np.int64)
    with pytest.raises(ValueError, match="4 columns but the taxonomy has 3 levels"):
        evaluate_distances(torch.zeros(2, 3), q, np.zeros((3, 4), np.int64), levels=Levels.default(3))
    with pytest.raises(ValueError, match="query labels have 4 levels and gallery labels 3"):
        evaluate_distances(torch.zeros(2, 3), q, np.zeros((3, 3), np.int64))
    for width in (1, 13):
        with pytest.raises(ValueError, match=r"labels must be \[N, K\]"):
            evaluate_distances(torch.zeros(2, 3), np.zeros((2, width), np.int64), np.zeros((3, width), np.int64))
