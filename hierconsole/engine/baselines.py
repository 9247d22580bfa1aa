"""Untrained baseline arms of a scoring job: frozen features and their PCA (vocabulary.BASELINES).

Both are scored exactly like a trained cell: the same official-test Q/G perturbations, the same strict
metrics and aggregation, as units of the evaluator's one scoring pass, after the same lock, since only the evaluate job
(created after the lock) computes them. Both rank by Euclidean distance:

- frozen: the input features, each row L2-normalised, so the ranking is that of cosine similarity.
- pca: the input features centred on the training mean and projected on the first `training.out_dim`
  principal axes of the training samples (the final runs' own training samples; no test sample, which the
  BaselineFit event records and the audit checks). Whitening is off: the axes keep their variances.
  The axes come from an SVD in float64 and each is signed so that its largest-magnitude loading is
  positive (the convention of scikit-learn's svd_flip), so the fit is a function of the data alone.

Their embeddings are stored beside the models' so that a re-score reads them instead of refitting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hierconsole.contract import events
from hierconsole.contract.jobspec import BaselineRef, JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.datasets.splits import index_sha256
from hierconsole.engine.trainer import Cancelled, Emit, load_indices
from hierconsole.vocabulary import FROZEN, PCA

FIT_PART = "fit"
"""The part of a training split file holding the samples a model (or the PCA) fits on."""


def l2_normalised(features: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (in float64, returned as float32 like every stored embedding); a zero
    row stays zero."""
    x = np.asarray(features, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


@dataclass(frozen=True)
class PCAFit:
    """A fitted PCA: the training mean and the unit principal axes (rows), largest variance first."""

    mean: np.ndarray
    """[D] float64."""
    components: np.ndarray
    """[k, D] float64, orthonormal rows."""
    explained_variance: np.ndarray
    """[k] variance (ddof=1) of the training samples along each axis."""

    def transform(self, features: np.ndarray) -> np.ndarray:
        """Projection of `features` ([N, D]) on the axes, float32 [N, k]; no whitening."""
        x = np.asarray(features, dtype=np.float64) - self.mean
        return (x @ self.components.T).astype(np.float32)


def fit_pca(train: np.ndarray, width: int) -> PCAFit:
    """PCA of the training rows to `width` axes, deterministic (see the module docstring for the sign)."""
    x = np.asarray(train, dtype=np.float64)
    n, dim = x.shape
    if not 1 <= width <= min(n, dim):
        raise ValueError(
            f"pca baseline: cannot fit {width} axes on {n} training samples of dimension {dim}; "
            f"training.out_dim must be at most {min(n, dim)}"
        )
    mean = x.mean(axis=0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
    components = vt[:width]
    flip = np.sign(components[np.arange(width), np.argmax(np.abs(components), axis=1)])
    components = components * np.where(flip == 0, 1.0, flip)[:, None]
    variance = s[:width] ** 2 / max(n - 1, 1)
    return PCAFit(mean=mean, components=components, explained_variance=variance)


def _test_embeddings(
    spec: JobSpec, baseline: BaselineRef, fs: FeatureSet, test_idx: np.ndarray, emit: Emit
) -> np.ndarray:
    """A baseline's official-test embeddings; fitting the PCA records what it was fitted on."""
    if baseline.arm == FROZEN:
        return l2_normalised(fs.features[test_idx])
    if baseline.arm == PCA:
        if spec.train_split is None:
            raise ValueError("pca baseline: the scoring job was given no training split to fit on")
        fitted = np.unique(load_indices(spec.train_split)[FIT_PART])
        fit = fit_pca(fs.features[fitted], spec.preset.training.out_dim)
        emit(
            events.BaselineFit(
                run_id=baseline.run_id,
                arm=baseline.arm,
                fitted_sha256=index_sha256(fitted),
                n_fitted=len(fitted),
                test_overlap=int(np.isin(fitted, test_idx).sum()),
                dim_in=fs.features.shape[1],
                dim_out=fit.components.shape[0],
            )
        )
        return fit.transform(fs.features[test_idx])
    raise ValueError(f"unknown baseline arm {baseline.arm!r}")


def baseline_embeddings(
    spec: JobSpec,
    fs: FeatureSet,
    test_idx: np.ndarray,
    emb_dir: Path,
    emit: Emit,
    should_stop: Callable[[], bool],
) -> list[tuple[BaselineRef, np.ndarray]]:
    """Every baseline of the spec with its official-test embeddings (rows in `test_idx` order).

    A re-score reads the stored embeddings; otherwise they are computed (the PCA fit emits its
    BaselineFit event) and stored. The evaluator scores them with the models' units, under seed
    BASELINE_SEED and Euclidean ranking."""
    out = []
    for baseline in spec.baselines:
        if should_stop():
            raise Cancelled("stopped during evaluation")
        path = emb_dir / baseline.embeddings_name
        if spec.rescore is not None:
            z = np.load(path)
        else:
            z = _test_embeddings(spec, baseline, fs, test_idx, emit)
            np.save(path, z)
        out.append((baseline, z))
    return out
