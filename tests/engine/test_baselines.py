"""The untrained baseline arms (frozen, pca) as the evaluator scores them, against independent references:
features whose strict frozen metrics are known in closed form, and a PCA written out in the test."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from hierconsole.contract import events, layout
from hierconsole.contract.jobspec import BaselineRef, JobSpec, TestSplit
from hierconsole.datasets import FeatureSet
from hierconsole.datasets.splits import index_sha256
from hierconsole.engine import baselines as baselines_module
from hierconsole.engine.baselines import fit_pca, l2_normalised
from hierconsole.engine.evaluator import run_evaluation
from hierconsole.engine.geometry import Euclidean
from hierconsole.engine.retrieval import evaluate
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.vocabulary import BASELINE_SEED, FROZEN, MAP, PCA, RECALL_KS, JobKind
from tests.engine.conftest import spec_preset


def _hierarchical_features(fs: FeatureSet, seed: int = 0) -> np.ndarray:
    """Each sample is a random positive multiple of its leaf's direction 3 e_high + 2 e_middle + e_leaf
    (orthogonal basis vectors). After L2-normalisation a leaf's samples coincide, a leaf is closer to
    the other leaves of its middle (cosine 13/14) than to those of its high only (9/14), and other highs
    are orthogonal; the random scale makes un-normalised Euclidean ranking differ."""
    labels = fs.labels
    n_leaf, n_middle = int(labels[:, 0].max()) + 1, int(labels[:, 1].max()) + 1
    n_high = int(labels[:, 2].max()) + 1
    x = np.zeros((len(labels), n_high + n_middle + n_leaf))
    rows = np.arange(len(labels))
    x[rows, labels[:, 2]] = 3.0
    x[rows, n_high + labels[:, 1]] = 2.0
    x[rows, n_high + n_middle + labels[:, 0]] = 1.0
    scale = np.random.default_rng(seed).uniform(0.2, 5.0, size=(len(labels), 1))
    return x * scale


def _known_metrics(q: np.ndarray, g: np.ndarray) -> dict[str, dict[str, float]]:
    """Query-micro strict metrics of the construction above, from counts alone: a query ranks its leaf's
    L items first, then the M other leaves of its middle, then the H other middles of its high, so the
    k-th strict middle positive sits at rank L + k and the k-th high one at L + M + k."""
    per_level: dict[str, list[list[float]]] = {level: [] for level in LEVELS}
    for lab in q:
        same_leaf = int((g[:, 0] == lab[0]).sum())
        same_middle = int(((g[:, 1] == lab[1]) & (g[:, 0] != lab[0])).sum())
        same_high = int(((g[:, 2] == lab[2]) & (g[:, 1] != lab[1])).sum())
        for level, before, n_pos in (
            ("leaf", 0, same_leaf),
            ("middle", same_leaf, same_middle),
            ("high", same_leaf + same_middle, same_high),
        ):
            if n_pos == 0:
                continue  # not a valid query at this level
            k = np.arange(1, n_pos + 1)
            ap = float(np.mean(k / (before + k)))
            per_level[level].append([ap, *(float(before < kk) for kk in RECALL_KS)])
    return {
        level: dict(zip([MAP, *(f"R@{k}" for k in RECALL_KS)], np.mean(rows, axis=0), strict=True))
        for level, rows in per_level.items()
    }


def _spec(train_split: Path | None, baselines: tuple[str, ...], **values) -> JobSpec:
    return JobSpec(
        job_id="s/evaluate",
        study_id="s",
        kind=JobKind.EVALUATE,
        seed=0,
        preset=spec_preset(**values),
        dataset_dir="unused",
        out_dir="unused",
        train_split=None if train_split is None else str(train_split),
        baselines=tuple(BaselineRef(f"s/evaluate/{b}", b) for b in baselines),
    )


def _qg(fs: FeatureSet, seed: int = 3) -> tuple[np.ndarray, dict[int, dict[str, np.ndarray]]]:
    test_idx = np.flatnonzero(fs.split == 2)
    rng = np.random.default_rng(seed)
    query = np.sort(rng.choice(test_idx, size=40, replace=False))
    return test_idx, {seed: {"query": query, "gallery": np.setdiff1d(test_idx, query)}}


def _score(spec, fs, test_idx, qg, tmp_path) -> list[events.Event]:
    """The baselines' events from a real evaluate job with no models: the data and the Q/G split on
    disk, the embeddings kept in ``tmp_path / EMBEDDINGS``."""
    del test_idx  # the job derives it from its Q/G splits
    fs.save(tmp_path / "dataset")
    splits = []
    for qseed, parts in qg.items():
        np.savez(tmp_path / f"qg{qseed}.npz", **parts)
        splits.append(TestSplit(qseed, str(tmp_path / f"qg{qseed}.npz")))
    spec = replace(
        spec, dataset_dir=str(tmp_path / "dataset"), out_dir=str(tmp_path), test_splits=tuple(splits)
    )
    out: list[events.Event] = []
    run_evaluation(spec, out.append)
    return out


def test_frozen_metrics_are_those_known_by_construction(tiny_fs, tmp_path):
    fs = replace(tiny_fs, features=_hierarchical_features(tiny_fs))
    test_idx, qg = _qg(fs)
    (ev,) = _score(_spec(None, (FROZEN,)), fs, test_idx, qg, tmp_path)
    assert isinstance(ev, events.TestMetrics)
    assert (ev.arm, ev.seed, ev.run_id, ev.perturbation) == (FROZEN, BASELINE_SEED, "s/evaluate/frozen", 3)
    parts = qg[3]
    known = _known_metrics(fs.labels[parts["query"]], fs.labels[parts["gallery"]])
    for level in LEVELS:
        for metric, value in known[level].items():
            assert ev.metrics[level][metric] == pytest.approx(value, abs=1e-12), (level, metric)
    # Strictness shows: a middle query's first hits are its own leaf, which middle does not count.
    assert known["middle"]["R@1"] < 1 and known["leaf"][MAP] == 1.0
    # The stored embeddings are the normalised features, and normalising is what makes the metrics so:
    # plain Euclidean ranking of the scaled features mixes a leaf's samples with the others.
    z = np.load(tmp_path / layout.EMBEDDINGS / "baseline__frozen.npy")
    x = fs.features[test_idx].astype(np.float64)
    np.testing.assert_allclose(z, x / np.linalg.norm(x, axis=1, keepdims=True), atol=1e-7)
    qpos, gpos = np.searchsorted(test_idx, parts["query"]), np.searchsorted(test_idx, parts["gallery"])
    raw = evaluate(
        torch.from_numpy(fs.features[test_idx][qpos]),
        torch.from_numpy(fs.features[test_idx][gpos]),
        fs.labels[parts["query"]],
        fs.labels[parts["gallery"]],
        Euclidean(),
    ).aggregate("micro")
    assert raw["leaf"][MAP] < 0.9 and raw["middle"][MAP] != pytest.approx(known["middle"][MAP])


def _pca_reference(train: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PCA from an SVD of the centred training matrix (a different route from the covariance
    eigendecomposition the engine uses), each axis signed so its largest-magnitude loading is positive."""
    x = train.astype(np.float64)
    mean = x.mean(axis=0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
    axes = vt[:width].copy()
    axes *= np.sign(axes[np.arange(width), np.argmax(np.abs(axes), axis=1)])[:, None]
    return mean, axes, s[:width] ** 2 / (len(x) - 1)


def test_pca_matches_an_svd_written_out(tiny_fs):
    train = tiny_fs.features[tiny_fs.split == 0]
    width = 8
    fit = fit_pca(train, width)
    mean, axes, variances = _pca_reference(train, width)
    np.testing.assert_allclose(fit.mean, mean, atol=1e-12)
    np.testing.assert_allclose(fit.components, axes, atol=1e-5)
    np.testing.assert_allclose(fit.explained_variance, variances, rtol=1e-8)
    test = tiny_fs.features[tiny_fs.split == 2]
    np.testing.assert_allclose(fit.transform(test), (test - mean) @ axes.T, atol=1e-5)
    # Deterministic: a refit is bitwise the same; the training projection is centred and uncorrelated
    # with the variances of the axes (no whitening).
    again = fit_pca(train.copy(), width)
    assert np.array_equal(again.components, fit.components) and np.array_equal(again.mean, fit.mean)
    z = fit.transform(train).astype(np.float64)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(np.cov(z, rowvar=False), np.diag(variances), atol=1e-4)
    with pytest.raises(ValueError, match="cannot fit 49 axes"):
        fit_pca(train, 49)


def test_pca_by_row_chunks_is_the_same_fit(tiny_fs, monkeypatch):
    """The fit and the projections accumulate over row chunks (memory); the chunking changes nothing
    beyond float64 rounding, and `rows` selects like fancy indexing."""
    rows = np.flatnonzero(tiny_fs.split == 0)
    whole = fit_pca(tiny_fs.features[rows], 8)
    monkeypatch.setattr(baselines_module, "ROW_CHUNK", 7)
    chunked = fit_pca(tiny_fs.features, 8, rows=rows)
    np.testing.assert_allclose(chunked.mean, whole.mean, atol=1e-12)
    np.testing.assert_allclose(chunked.components, whole.components, atol=1e-9)
    test = np.flatnonzero(tiny_fs.split == 2)
    np.testing.assert_allclose(chunked.transform(tiny_fs.features, test), whole.transform(tiny_fs.features[test]), atol=1e-6)
    assert np.array_equal(l2_normalised(tiny_fs.features, test), l2_normalised(tiny_fs.features[test]))


def test_pca_whitening_only_when_asked(tiny_fs):
    train = tiny_fs.features[tiny_fs.split == 0]
    test = tiny_fs.features[tiny_fs.split == 2]
    mean, axes, variances = _pca_reference(train, 8)
    plain = fit_pca(train, 8)
    white = fit_pca(train, 8, whiten=True)
    assert not plain.whiten and np.array_equal(white.components, plain.components)
    np.testing.assert_allclose(white.transform(test), (test - mean) @ axes.T / np.sqrt(variances), atol=1e-5)
    z = white.transform(train).astype(np.float64)
    np.testing.assert_allclose(np.cov(z, rowvar=False), np.eye(8), atol=1e-4)


def test_pca_arm_fits_on_the_training_split_only_and_scores_its_projection(tiny_fs, tmp_path):
    fitted = np.flatnonzero(tiny_fs.split == 0)
    split_file = tmp_path / "final_train.npz"
    np.savez(split_file, fit=fitted)
    test_idx, qg = _qg(tiny_fs)
    spec = _spec(split_file, (FROZEN, PCA))
    emitted = _score(spec, tiny_fs, test_idx, qg, tmp_path)
    fit_events = [e for e in emitted if isinstance(e, events.BaselineFit)]
    scored = {e.arm: e for e in emitted if isinstance(e, events.TestMetrics)}
    assert len(fit_events) == 1 and sorted(scored) == [FROZEN, PCA]
    fit = fit_events[0]
    assert fit.fitted_sha256 == index_sha256(fitted) and fit.n_fitted == len(fitted) and fit.test_overlap == 0
    assert (fit.dim_in, fit.dim_out) == (tiny_fs.features.shape[1], spec.preset.training.out_dim)
    mean, axes, _ = _pca_reference(tiny_fs.features[fitted], spec.preset.training.out_dim)
    expected = (tiny_fs.features[test_idx] - mean) @ axes.T
    z = np.load(tmp_path / layout.EMBEDDINGS / "baseline__pca.npy")
    np.testing.assert_allclose(z, expected, atol=1e-5)
    parts = qg[3]
    qpos, gpos = np.searchsorted(test_idx, parts["query"]), np.searchsorted(test_idx, parts["gallery"])
    reference = evaluate(
        torch.from_numpy(z[qpos]),
        torch.from_numpy(z[gpos]),
        tiny_fs.labels[parts["query"]],
        tiny_fs.labels[parts["gallery"]],
        Euclidean(),
    ).aggregate("micro")
    assert scored[PCA].metrics == {lv: {k: float(v) for k, v in m.items()} for lv, m in reference.items()}
    frozen = l2_normalised(tiny_fs.features[test_idx])
    assert np.array_equal(np.load(tmp_path / layout.EMBEDDINGS / "baseline__frozen.npy"), frozen)


def test_the_pca_arm_whitens_when_the_preset_asks(tiny_fs, tmp_path):
    fitted = np.flatnonzero(tiny_fs.split == 0)
    np.savez(tmp_path / "final_train.npz", fit=fitted)
    test_idx, qg = _qg(tiny_fs)
    spec = _spec(tmp_path / "final_train.npz", (PCA,), **{"evaluation.pca_whiten": True})
    _score(spec, tiny_fs, test_idx, qg, tmp_path)
    mean, axes, variances = _pca_reference(tiny_fs.features[fitted], spec.preset.training.out_dim)
    z = np.load(tmp_path / layout.EMBEDDINGS / "baseline__pca.npy")
    np.testing.assert_allclose(z, (tiny_fs.features[test_idx] - mean) @ axes.T / np.sqrt(variances), atol=1e-5)


def test_pca_without_a_training_split_is_refused(tiny_fs, tmp_path):
    test_idx, qg = _qg(tiny_fs)
    with pytest.raises(ValueError, match="no training split"):
        _score(_spec(None, (PCA,)), tiny_fs, test_idx, qg, tmp_path)
