"""Official-test evaluation of a locked study's final models on every query/gallery perturbation.

This runs only in an evaluate job, which the orchestrator creates only after the study is locked: the
training jobs are never handed the test indices. The projected test embeddings are kept so that a study
can be re-scored under another aggregation without touching the models again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hierconsole import checkpoints
from hierconsole.datasets import FeatureSet
from hierconsole.geometry import make_geometry, norm_bound
from hierconsole.jobspec import JobSpec
from hierconsole.retrieval import evaluate
from hierconsole.training import build_projector, embed, load_indices, resolve_device

Emit = Callable[[dict[str, Any]], None]


def _qg_splits(spec: JobSpec) -> dict[int, dict[str, np.ndarray]]:
    return {
        int(role.split(":", 1)[1]): load_indices(path)
        for role, path in sorted(spec.splits.items())
        if role.startswith("qg:")
    }


def run_evaluation(spec: JobSpec, emit: Emit, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Evaluate (kind "evaluate") or re-score stored embeddings (kind "rescore")."""
    device = resolve_device(spec.device)
    torch.set_num_threads(max(1, spec.threads))
    fs = FeatureSet.load(Path(spec.dataset_dir))
    labels = torch.from_numpy(np.ascontiguousarray(fs.labels)).to(device)
    qg = _qg_splits(spec)
    test_idx = np.unique(np.concatenate([np.concatenate([p["query"], p["gallery"]]) for p in qg.values()]))
    test_t = torch.from_numpy(test_idx).to(device)
    if spec.kind == "rescore":
        emb_dir = Path(spec.embeddings_dir or "")
        if not np.array_equal(np.load(emb_dir / "test_idx.npy"), test_idx):
            raise ValueError(f"stored embeddings in {emb_dir} were made for other test indices")
    else:
        emb_dir = Path(spec.out_dir) / "embeddings"
        emb_dir.mkdir(parents=True, exist_ok=True)
        np.save(emb_dir / "test_idx.npy", test_idx)
    features = None
    for job_id, folder in sorted(spec.sources.items()):
        source = JobSpec.read(Path(folder) / "spec.json")
        for cell in source.cells:
            if should_stop():
                from hierconsole.training import Cancelled

                raise Cancelled("stopped during evaluation")
            run_id = f"{job_id}/{cell.key}"
            geometry = make_geometry(cell.geometry, c=source.hyper.c, r=source.hyper.r)
            emb_path = emb_dir / f"{job_id.rsplit('/', 1)[-1]}__{cell.key}.npy"
            if spec.kind == "rescore":
                z = torch.from_numpy(np.load(emb_path)).to(device)
            else:
                if features is None:
                    features = torch.from_numpy(np.ascontiguousarray(fs.features)).to(device)
                model = build_projector(fs.features.shape[1], cell, source.hyper).to(device)
                model.load_state_dict(
                    checkpoints.load_payload(Path(folder) / f"final-{cell.key}.pt")["model"]
                )
                z = embed(model, features[test_t])
                np.save(emb_path, z.cpu().numpy())
                if cell.geometry == "poincare":
                    max_norm = float(z.norm(dim=-1).max())
                    emit(
                        {
                            "kind": "norms",
                            "key": f"norms:{run_id}",
                            "run_id": run_id,
                            "max_norm": max_norm,
                            "radius": float(1.0 / np.sqrt(source.hyper.c)),
                            "bound": float(norm_bound(source.hyper.c, source.hyper.r)),
                        }
                    )
            for qseed, parts in qg.items():
                qpos = torch.from_numpy(np.searchsorted(test_idx, parts["query"])).to(device)
                gpos = torch.from_numpy(np.searchsorted(test_idx, parts["gallery"])).to(device)
                result = evaluate(
                    z[qpos],
                    z[gpos],
                    labels[test_t[qpos]],
                    labels[test_t[gpos]],
                    geometry,
                )
                # Re-scoring under the registered aggregation only checks the stored endpoint; it must
                # never overwrite it, so it goes out as a separate "reconcile" event.
                kind = (
                    "reconcile"
                    if spec.kind == "rescore" and spec.aggregation == source.aggregation
                    else "metrics"
                )
                emit(
                    {
                        "kind": kind,
                        "key": f"{kind}:{run_id}:{qseed}:{spec.aggregation}",
                        "run_id": run_id,
                        "seed": source.seed,
                        "arm": cell.arm,
                        "perturbation": qseed,
                        "aggregation": spec.aggregation,
                        "posthoc": spec.kind == "rescore" and spec.aggregation != source.aggregation,
                        "metrics": result.aggregate(spec.aggregation),
                    }
                )
