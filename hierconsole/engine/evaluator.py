"""Official-test evaluation of a locked study's final models on every query/gallery perturbation.

This runs only in an evaluate job, which the orchestrator creates only after the study is locked: the
training jobs are never handed the test indices. The job's spec names every model to score (`models`)
and every perturbation (`test_splits`); it reads no other job's spec. The projected test embeddings are
kept so that a study can be re-scored under another aggregation without touching the models again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from hierconsole.contract import events, layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.engine import checkpoints
from hierconsole.engine.baselines import score_baselines
from hierconsole.engine.geometry import ball_radius, geometry_of, norm_bound
from hierconsole.engine.retrieval import evaluate
from hierconsole.engine.trainer import Cancelled, Emit, build_projector, embed, load_indices, resolve_device
from hierconsole.vocabulary import POINCARE, JobKind


def run_evaluation(spec: JobSpec, emit: Emit, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Evaluate (kind "evaluate") or re-score stored embeddings (kind "rescore")."""
    device = resolve_device(spec.device)
    torch.set_num_threads(max(1, spec.threads))
    fs = FeatureSet.load(Path(spec.dataset_dir), expect_sha256=spec.dataset_sha256)
    labels = torch.from_numpy(np.ascontiguousarray(fs.labels)).to(device)
    poincare = spec.preset.geometry.poincare
    registered = spec.preset.evaluation.aggregation
    qg = {t.seed: load_indices(t.path) for t in sorted(spec.test_splits, key=lambda t: t.seed)}
    test_idx = np.unique(np.concatenate([np.concatenate([p["query"], p["gallery"]]) for p in qg.values()]))
    test_t = torch.from_numpy(test_idx).to(device)
    rescoring = spec.kind == JobKind.RESCORE
    if spec.rescore is not None:
        emb_dir = Path(spec.rescore.embeddings_dir)
        if not np.array_equal(np.load(emb_dir / "test_idx.npy"), test_idx):
            raise ValueError(f"stored embeddings in {emb_dir} were made for other test indices")
    else:
        emb_dir = Path(spec.out_dir) / layout.EMBEDDINGS
        emb_dir.mkdir(parents=True, exist_ok=True)
        np.save(emb_dir / "test_idx.npy", test_idx)
    # Re-scoring under the registered aggregation only checks the stored endpoint; it must never
    # overwrite it, so it goes out as a separate kind of event.
    metrics_event = events.Reconcile if rescoring and spec.aggregation == registered else events.TestMetrics
    features = None
    for model_ref in spec.models:
        if should_stop():
            raise Cancelled("stopped during evaluation")
        cell = model_ref.cell
        geometry = geometry_of(cell.geometry, poincare)
        emb_path = emb_dir / model_ref.embeddings_name
        if rescoring:
            z = torch.from_numpy(np.load(emb_path)).to(device)
        else:
            if features is None:
                features = torch.from_numpy(np.ascontiguousarray(fs.features)).to(device)
            model = build_projector(fs.features.shape[1], cell, spec.preset.training, poincare).to(device)
            model.load_state_dict(checkpoints.load_payload(Path(model_ref.weights))["model"])
            z = embed(model, features[test_t])
            np.save(emb_path, z.cpu().numpy())
            if cell.geometry == POINCARE:
                emit(
                    events.Norms(
                        run_id=model_ref.run_id,
                        max_norm=float(z.norm(dim=-1).max()),
                        radius=ball_radius(poincare.c),
                        bound=norm_bound(poincare.c, poincare.r),
                    )
                )
        for qseed, parts in qg.items():
            qpos = torch.from_numpy(np.searchsorted(test_idx, parts["query"])).to(device)
            gpos = torch.from_numpy(np.searchsorted(test_idx, parts["gallery"])).to(device)
            result = evaluate(z[qpos], z[gpos], labels[test_t[qpos]], labels[test_t[gpos]], geometry)
            emit(
                metrics_event(
                    run_id=model_ref.run_id,
                    seed=model_ref.seed,
                    arm=cell.arm,
                    perturbation=qseed,
                    aggregation=spec.aggregation,
                    posthoc=rescoring and spec.aggregation != registered,
                    metrics={
                        level: {k: float(v) for k, v in m.items()}
                        for level, m in result.aggregate(spec.aggregation).items()
                    },
                )
            )
    # The untrained baselines (frozen, pca) go through the same perturbations, metrics and events.
    score_baselines(spec, fs, test_idx, qg, emb_dir, emit, metrics_event, should_stop, device)
