"""The baselines as declared: the HIER-style arm under the authors' recipe has their head, and the pca
baseline was fitted on the final runs' training samples only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hierconsole.datasets.splits import index_sha256
from hierconsole.plurals import counted
from hierconsole.study.analysis.audits.fairness import EXEMPT_CHECKS, FinalCells
from hierconsole.study.analysis.audits.result import Check, Study, cell_name, evidence
from hierconsole.vocabulary import HIER_AUTHORS_EXEMPT, HIER_STYLE, PCA


@dataclass(frozen=True)
class PcaFit:
    study: Study
    run_id: str
    """The pca baseline's run."""
    fit: dict[str, Any] | None
    """The payload of the evaluation's latest baseline-fit event; None before the fit."""
    training: np.ndarray | None = None
    """The samples the final runs fit (with `fit`)."""
    test: np.ndarray | None = None
    """The official-test samples (with `fit`)."""


def authors_head_trainable(in_dim: int, embedding: int) -> int:
    """The authors' HIER head: LayerNorm without affine (none) + Linear(d, e): 98,432 at d=768, e=128."""
    return in_dim * embedding + embedding


def hier_authors_recipe(e: FinalCells) -> Check:
    """The HIER-style arm under the authors' recipe, against that recipe: every run has their head's
    parameter count, and the audits that compare cells name it as exempt (EXEMPT_CHECKS); the update
    budget, sealed test and tuning isolation hold for it as for the cells."""
    name = "hier_authors_recipe"
    hier = e.study.authors_hier
    if hier is None:
        return Check(name, True, f"no {HIER_STYLE} arm trained by the authors' recipe in this study")
    runs = [r for r in e.runs if r["arm"] == HIER_STYLE]
    if not runs:
        return Check(name, None, f"no final {HIER_STYLE} runs yet")
    assert e.dim is not None  # it has final runs, so the study and its dataset are registered
    expected = authors_head_trainable(e.dim, hier.embedding)
    bad = [f"{cell_name(r['run_id'])} has {r['trainable_params']:,}" for r in runs if r["trainable_params"] != expected]
    summary = (
        f"{counted(len(runs), 'run')}: their head, {expected:,} trainable parameters for {e.dim}-D input "
        f"(LayerNorm, Linear to {hier.embedding}); class-balanced batches of {hier.batch_size} "
        f"({hier.batch_size // hier.per_class} classes x {hier.per_class}); {', '.join(EXEMPT_CHECKS)}: "
        f"{HIER_AUTHORS_EXEMPT}"
    )
    return Check(name, not bad, evidence(summary, bad))


def pca_fitted_on_training_only(e: PcaFit) -> Check:
    """The pca baseline was fitted on the final runs' training samples and on no official-test sample:
    the hash of the fitted indices its evaluation recorded is recomputed from the split files here."""
    name = "pca_fitted_on_training_only"
    if PCA not in e.study.preset.evaluation.baselines:
        return Check(name, True, "no pca baseline")
    fit = e.fit
    if fit is None:
        return Check(name, None, "the pca baseline has not been fitted")
    assert e.training is not None and e.test is not None  # gathered with the fit
    expected = np.unique(e.training)
    test = e.test
    overlap = int(np.isin(expected, test).sum())
    bad = []
    if fit["run_id"] != e.run_id:
        bad.append(f"the fit was recorded for {fit['run_id']}, not {e.run_id}")
    if fit["fitted_sha256"] != index_sha256(expected):
        bad.append(
            f"fitted on samples with hash {fit['fitted_sha256'][:12]} ({fit['n_fitted']}), not the "
            f"{len(expected)} training samples of the final runs ({index_sha256(expected)[:12]})"
        )
    if fit["test_overlap"] or overlap:
        bad.append(f"{max(fit['test_overlap'], overlap)} fitted samples are official-test samples")
    summary = (
        f"{fit['dim_in']}-D -> {fit['dim_out']}-D on {fit['n_fitted']} training samples "
        f"(index hash {fit['fitted_sha256'][:12]}), none of the {len(test)} official-test samples"
    )
    return Check(name, not bad, evidence(summary, bad))
