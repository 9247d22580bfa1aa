"""Unit costs of the worker's two loops on this machine, measured in well under a second each: one
optimiser step of the batched factorial (seconds per cell-update) and the strict retrieval of a few
queries against a gallery (seconds per query x gallery pair), at the shapes a plan runs.

`study.replication.calibration` calls these once per machine and plan; `study.replication.costs`
multiplies them by a plan's counts. The inputs are random (the cost of a step does not depend on the values), labels have
repeats so every SupCon row has positives.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from hierconsole.config.preset import PoincareConfig, TrainingConfig
from hierconsole.contract.jobspec import CellSpec
from hierconsole.engine.batched import BatchedCells
from hierconsole.engine.geometry import geometry_of
from hierconsole.engine.retrieval import evaluate
from hierconsole.engine.trainer import CellRng
from hierconsole.vocabulary import GEOMETRIES

MIN_SECONDS = 0.3
"""Each loop is timed until at least this long has passed (after a warm-up), so one slow call is averaged out."""


def _labels(n: int, leaves: int) -> np.ndarray:
    leaf = np.arange(n) % max(1, leaves)
    return np.stack([leaf, leaf // 2, leaf // 4], axis=1).astype(np.int64)


def _timed(fn, warmup: int = 2, least: int = 3) -> float:  # noqa: ANN001
    """Seconds per call of ``fn`` after ``warmup`` calls, over at least ``least`` calls and MIN_SECONDS."""
    for _ in range(warmup):
        fn()
    calls, started = 0, time.perf_counter()
    while calls < least or time.perf_counter() - started < MIN_SECONDS:
        fn()
        calls += 1
    return (time.perf_counter() - started) / calls


def cell_update_seconds(
    arms: tuple[str, ...], in_dim: int, training: TrainingConfig, poincare: PoincareConfig, tau: float = 0.1
) -> float:
    """Seconds per cell per optimiser step of ``arms`` trained together on [batch, in_dim] inputs."""
    device = torch.device("cpu")
    specs = [CellSpec.of(arm, tau) for arm in arms]
    cells = BatchedCells(specs, in_dim, training, poincare, device)
    rngs = [CellRng(device, i) for i in range(len(specs))]
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(training.batch_size, in_dim, generator=generator)
    labels = torch.from_numpy(_labels(training.batch_size, training.batch_size // 4))
    return _timed(lambda: cells.step(x, labels, rngs, labels)) / len(specs)


def comparison_seconds(gallery: int, out_dim: int, poincare: PoincareConfig, queries: int = 32) -> float:
    """Seconds per query x gallery pair of the strict retrieval metrics, averaged over both geometries."""
    generator = torch.Generator().manual_seed(0)
    g_emb = torch.randn(gallery, out_dim, generator=generator) * 0.1
    q_emb = torch.randn(queries, out_dim, generator=generator) * 0.1
    g_lab, q_lab = _labels(gallery, max(2, gallery // 8)), _labels(queries, max(2, gallery // 8))
    seconds = 0.0
    for name in GEOMETRIES:
        geometry = geometry_of(name, poincare)
        seconds += _timed(lambda geometry=geometry: evaluate(q_emb, g_emb, q_lab, g_lab, geometry), 1, 2)
    return seconds / len(GEOMETRIES) / (queries * gallery)
