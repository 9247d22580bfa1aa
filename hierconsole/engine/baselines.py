"""Untrained baseline arms of a scoring job: frozen features and their PCA (vocabulary.UNTRAINED_BASELINES).

Both are scored exactly like a trained cell: the same official-test Q/G perturbations, the same strict
metrics and aggregation, as units of the evaluator's one scoring pass, after the same lock, since only the evaluate job
(created after the lock) computes them. Both rank by Euclidean distance:

- frozen: the input features, each row L2-normalised, so the ranking is that of cosine similarity.
- pca: the input features centred on the training mean and projected on the first `training.out_dim`
  principal axes of the training samples (the final runs' own training samples; no test sample, which the
  BaselineFit event records and the audit checks). Whitening is off unless `evaluation.pca_whiten` asks
  for it: the axes keep their variances. The axes are the top eigenvectors of the float64 covariance and
  each is signed so that its largest-magnitude loading is positive (the convention of scikit-learn's
  svd_flip), so the fit is a function of the data alone.

Their embeddings are stored beside the models' so that a re-score reads them instead of refitting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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

ROW_CHUNK = 4096
"""Rows converted to float64 at a time: the fit and the projections never hold a float64 copy of a whole
[N, D] matrix (0.6 GB at N = 10^5, D = 768), only [ROW_CHUNK, D] (24 MiB at D = 768) and the [D, D] covariance."""


def _chunks(features: np.ndarray, rows: np.ndarray | None) -> Iterator[np.ndarray]:
    """`features[rows]` (all rows when None) in float64 chunks of ROW_CHUNK rows, in order."""
    n = features.shape[0] if rows is None else len(rows)
    for start in range(0, n, ROW_CHUNK):
        part = slice(start, start + ROW_CHUNK)
        yield np.asarray(features[part] if rows is None else features[rows[part]], dtype=np.float64)


def l2_normalised(features: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (`features[rows]`) scaled to unit L2 norm, in float64, returned as float32 like every stored
    embedding; a zero row stays zero."""
    n = features.shape[0] if rows is None else len(rows)
    out = np.empty((n, features.shape[1]), dtype=np.float32)  # filled in place: no second copy
    for start, x in zip(range(0, n, ROW_CHUNK), _chunks(features, rows), strict=True):
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        out[start : start + len(x)] = x / np.where(norms > 0, norms, 1.0)
    return out


@dataclass(frozen=True)
class PCAFit:
    """A fitted PCA: the training mean and the unit principal axes (rows), largest variance first."""

    mean: np.ndarray
    """[D] float64."""
    components: np.ndarray
    """[k, D] float64, orthonormal rows."""
    explained_variance: np.ndarray
    """[k] variance (ddof=1) of the training samples along each axis."""
    whiten: bool = False
    """Whether `transform` scales each axis to unit training variance (preset `evaluation.pca_whiten`)."""

    def transform(self, features: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Projection of `features[rows]` ([N, D]) on the axes, float32 [N, k]; divided by each axis's
        standard deviation when whitening."""
        scale = 1.0 / np.sqrt(self.explained_variance) if self.whiten else None
        n = features.shape[0] if rows is None else len(rows)
        out = np.empty((n, len(self.components)), dtype=np.float32)
        for start, x in zip(range(0, n, ROW_CHUNK), _chunks(features, rows), strict=True):
            z = (x - self.mean) @ self.components.T
            out[start : start + len(x)] = z if scale is None else z * scale
        return out


def fit_pca(train: np.ndarray, width: int, *, rows: np.ndarray | None = None, whiten: bool = False) -> PCAFit:
    """PCA of the training rows (`train[rows]`) to `width` axes, deterministic (see the module docstring
    for the sign).

    The axes are the top eigenvectors of the float64 covariance, accumulated over row chunks (two passes:
    the mean, then the centred scatter), which holds [D, D] instead of an SVD's [N, D] copies."""
    n = train.shape[0] if rows is None else len(rows)
    dim = train.shape[1]
    if not 1 <= width <= min(n, dim):
        raise ValueError(
            f"pca baseline: cannot fit {width} axes on {n} training samples of dimension {dim}; "
            f"training.out_dim must be at most {min(n, dim)}"
        )
    total = np.zeros(dim)
    for x in _chunks(train, rows):
        total += x.sum(axis=0)
    mean = total / n
    scatter = np.zeros((dim, dim))
    for x in _chunks(train, rows):
        centred = x - mean
        scatter += centred.T @ centred
    values, vectors = np.linalg.eigh(scatter)  # ascending: the largest are the last columns
    values, components = values[::-1][:width], vectors[:, ::-1][:, :width].T
    flip = np.sign(components[np.arange(width), np.argmax(np.abs(components), axis=1)])
    components = components * np.where(flip == 0, 1.0, flip)[:, None]
    variance = np.clip(values, 0.0, None) / max(n - 1, 1)
    return PCAFit(mean=mean, components=np.ascontiguousarray(components), explained_variance=variance, whiten=whiten)


def _test_embeddings(
    spec: JobSpec, baseline: BaselineRef, fs: FeatureSet, test_idx: np.ndarray, emit: Emit
) -> np.ndarray:
    """A baseline's official-test embeddings; fitting the PCA records what it was fitted on."""
    if baseline.arm == FROZEN:
        return l2_normalised(fs.features, test_idx)
    if baseline.arm == PCA:
        if spec.train_split is None:
            raise ValueError("pca baseline: the scoring job was given no training split to fit on")
        fitted = np.unique(load_indices(spec.train_split)[FIT_PART])
        fit = fit_pca(
            fs.features, spec.preset.training.out_dim, rows=fitted, whiten=spec.preset.evaluation.pca_whiten
        )
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
        return fit.transform(fs.features, test_idx)
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
