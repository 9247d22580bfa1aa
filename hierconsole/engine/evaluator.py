"""Official-test evaluation of a locked study's final models on every query/gallery perturbation.

This runs only in an evaluate job, which the orchestrator creates only after the study is locked: the
training jobs are never handed the test indices. The job's spec names every model to score (`models`)
and every perturbation (`test_splits`); it reads no other job's spec. The projected test embeddings are
kept so that a study can be re-scored under another aggregation without touching the models again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from hierconsole.contract import events, layout
from hierconsole.contract.jobspec import JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.engine import checkpoints
from hierconsole.engine.baselines import baseline_embeddings
from hierconsole.engine.determinism import configure_device
from hierconsole.engine.geometry import Geometry, Poincare, ball_radius, make_geometry, norm_bound
from hierconsole.engine.hier_style import HierBall
from hierconsole.engine.retrieval import Unit, evaluate_units
from hierconsole.engine.trainer import (
    Cancelled,
    Emit,
    build_projector,
    cell_geometry,
    embed,
    load_indices,
    resolve_device,
)
from hierconsole.engine.whole_tree import whole_tree_metrics
from hierconsole.levels import WHOLE_TREE
from hierconsole.metrics.cores import usable_cores
from hierconsole.vocabulary import BASELINE_SEED, EUCLIDEAN, JobKind


def run_evaluation(
    spec: JobSpec,
    emit: Emit,
    should_stop: Callable[[], bool] = lambda: False,
    workers: int | None = None,
) -> None:
    """Evaluate (kind "evaluate") or re-score stored embeddings (kind "rescore").

    The units are scored ``workers`` at a time (default: every core this process may use); the metrics
    do not depend on that width (see ``evaluate_units``).
    """
    workers = usable_cores() if workers is None else workers
    device = resolve_device(spec.device)
    configure_device(device)  # deterministic CUDA kernels (a no-op on CPU)
    torch.set_num_threads(max(1, spec.threads))
    fs = FeatureSet.load(Path(spec.dataset_dir), expect_sha256=spec.dataset_sha256)
    labels = torch.from_numpy(np.ascontiguousarray(fs.labels)).to(device)
    poincare = spec.preset.geometry.poincare
    hier = spec.preset.baselines.hier
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
    embedded = []
    for model_ref in spec.models:
        if should_stop():
            raise Cancelled("stopped during evaluation")
        cell = model_ref.cell
        emb_path = emb_dir / model_ref.embeddings_name
        if rescoring:
            z = torch.from_numpy(np.load(emb_path)).to(device)
        else:
            if features is None:
                features = torch.from_numpy(np.ascontiguousarray(fs.features)).to(device)
            model = build_projector(fs.features.shape[1], cell, spec.preset.training, poincare, hier).to(device)
            model.load_state_dict(checkpoints.load_payload(Path(model_ref.weights))["model"])
            z = embed(model, features[test_t])
            np.save(emb_path, z.cpu().numpy())
            ball = model.geometry
            if isinstance(ball, Poincare):
                # The ball's own operating point: the study's, or HIER's for the HIER-style cell.
                emit(
                    events.Norms(
                        run_id=model_ref.run_id,
                        max_norm=float(z.norm(dim=-1).max()),
                        radius=ball_radius(ball.c),
                        bound=ball.bound if isinstance(ball, HierBall) else norm_bound(poincare.c, poincare.r),
                    )
                )
        geometry = cell_geometry(cell, poincare, hier)
        embedded.append(_Scored(model_ref.run_id, model_ref.seed, cell.arm, geometry, z))
    # The untrained baselines (frozen, pca) are scored like the models: same units, metrics and events.
    euclidean = make_geometry(EUCLIDEAN)
    for baseline, z_np in baseline_embeddings(spec, fs, test_idx, emb_dir, emit, should_stop):
        z = torch.from_numpy(z_np).to(device)
        embedded.append(_Scored(baseline.run_id, BASELINE_SEED, baseline.arm, euclidean, z))
    positions = {
        qseed: (
            torch.from_numpy(np.searchsorted(test_idx, parts["query"])).to(device),
            torch.from_numpy(np.searchsorted(test_idx, parts["gallery"])).to(device),
        )
        for qseed, parts in qg.items()
    }
    test_labels = labels[test_t]
    # Every (model x perturbation) unit is scored at once across the machine's cores; units of one
    # perturbation share their labels, whose strict positives are then computed once.
    cells = [(scored, qseed) for scored in embedded for qseed in qg]
    units = [
        Unit(
            scored.z[qpos],
            scored.z[gpos],
            test_labels[qpos],
            test_labels[gpos],
            scored.geometry,
            labels_key=qseed,
            levels=fs.taxonomy.levels,
        )
        for scored in embedded
        for qseed, (qpos, gpos) in positions.items()
    ]
    whole_tree = spec.preset.evaluation.whole_tree
    for (scored, qseed), unit, result in zip(cells, units, evaluate_units(units, workers=workers), strict=True):
        if should_stop():
            raise Cancelled("stopped during evaluation")
        metrics = {level: {k: float(v) for k, v in m.items()} for level, m in result.aggregate(spec.aggregation).items()}
        if whole_tree:
            metrics[WHOLE_TREE] = whole_tree_metrics(
                whole_tree,
                spec.aggregation,
                unit.query_emb,
                unit.gallery_emb,
                unit.q_labels,
                unit.g_labels,
                scored.geometry,
            )
        emit(
            metrics_event(
                run_id=scored.run_id,
                seed=scored.seed,
                arm=scored.arm,
                perturbation=qseed,
                aggregation=spec.aggregation,
                posthoc=rescoring and spec.aggregation != registered,
                metrics=metrics,
            )
        )


@dataclass(frozen=True)
class _Scored:
    """One embedded arm of the evaluation: a trained model or a baseline."""

    run_id: str
    seed: int
    arm: str
    geometry: Geometry
    z: torch.Tensor
