"""The final jobs of several seeds of one study trained in one process as one computation.

A study's final jobs differ only in their seed: the same cells, preset, data and training split. On a GPU
the per-step cost of one job's four cells is kernel launches, not arithmetic (four cells of 205,600
parameters are tiny), so stacking every seed's cells in one ``BatchedCells`` (12 cells for 3 seeds)
divides the launches per step by the number of seeds. Each job keeps everything it has alone: its
batch order (its own generator), its initial state, its cells' dropout streams, its events, checkpoints,
validation record and final models, written by its own ``FactorialTrainer``; only the arithmetic is
shared. Each cell's numbers are those of its per-seed job: on CPU bit for bit (tests/engine/
test_stacked.py), because every per-group part of a step runs the same calls at the same shapes as the
per-seed job (see ``StackedProjector.forward`` and ``BatchedCells.grouped_fused_losses``) and the shared
parts (the second layer's batched matmul, dropout draws, per-cell clipping, AdamW) are per cell.

Jobs that cannot step together run one after the other, each on its own engine, with the same result:
jobs resuming from different epochs (a kill between two jobs' checkpoint writes), or a job whose
checkpoint was written by the per-cell reference engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from hierconsole.contract import events
from hierconsole.contract.jobspec import JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.engine.batched import BatchedCells, GroupView
from hierconsole.engine.determinism import capture_global_rngs, restore_global_rngs
from hierconsole.engine.trainer import Emit, FactorialTrainer
from hierconsole.vocabulary import HIER_STYLE_LOSS, JobKind

__all__ = ["StackedTrainer", "stacking_problem"]


def stacking_problem(specs: Sequence[JobSpec]) -> str | None:
    """Why these job specs cannot be trained as one stack (None if they can): they must be final jobs of
    one study with the same cells, preset, data, splits and engine options, and distinct seeds."""
    if not specs:
        return "no job to stack"
    first = specs[0]
    same = (
        ("study", lambda s: s.study_id),
        ("cells", lambda s: s.cells),
        ("preset", lambda s: s.preset.to_dict()),
        ("dataset", lambda s: (s.dataset_dir, s.dataset_sha256)),
        ("training split", lambda s: s.train_split),
        ("validation split", lambda s: s.val_split),
        ("training taxonomy", lambda s: s.train_taxonomy),
        ("checkpoint period", lambda s: s.checkpoint_every),
    )
    for spec in specs:
        if spec.kind != JobKind.FINAL:
            return f"{spec.job_id} is a {spec.kind} job; only final jobs are stacked"
        if not spec.batched:
            return f"{spec.job_id} asks for the per-cell reference engine (batched = false)"
        if any(c.loss == HIER_STYLE_LOSS for c in spec.cells):
            return f"{spec.job_id} trains the HIER-style cell, which keeps its own model (never stacked)"
        for what, key in same:
            if key(spec) != key(first):
                return f"{spec.job_id} and {first.job_id} differ in their {what}"
    seeds = [s.seed for s in specs]
    if len(set(seeds)) != len(seeds):
        return f"seeds {seeds} repeat: each stacked job must train its own seed"
    if len({s.job_id for s in specs}) != len(specs):
        return "a job appears twice"
    return None


class StackedTrainer:
    """Trains final jobs of several seeds of one study as one stack; each job's ``emit`` gets its events."""

    def __init__(
        self,
        specs: Sequence[JobSpec],
        emits: Sequence[Emit],
        should_stop: Callable[[], bool] = lambda: False,
        *,
        dtype: torch.dtype = torch.float32,
    ):
        problem = stacking_problem(specs)
        if problem is not None:
            raise ValueError(f"cannot stack these jobs: {problem}")
        if len(emits) != len(specs):
            raise ValueError(f"{len(emits)} event sinks for {len(specs)} jobs")
        self.specs = tuple(specs)
        first = specs[0]
        # One load and one device copy of the features for every job (the same checked data).
        dataset = FeatureSet.load(Path(first.dataset_dir), expect_sha256=first.dataset_sha256)
        self.trainers = [
            FactorialTrainer(spec, emit, should_stop, dtype=dtype, dataset=dataset)
            for spec, emit in zip(specs, emits, strict=True)
        ]
        for t in self.trainers[1:]:
            t.features = self.trainers[0].features

    def run(self) -> dict[str, dict[str, events.Final]]:
        """Train every job to its end; job id -> that job's Final events by cell."""
        latest = [t.latest_checkpoint() for t in self.trainers]
        epochs = {ckpt[0] if ckpt is not None else 0 for ckpt, _ in latest}
        per_cell = any(ckpt is not None and not t.checkpoint_is_batched(ckpt[1]) for t, (ckpt, _) in zip(self.trainers, latest, strict=True))
        if len(self.trainers) == 1 or len(epochs) > 1 or per_cell:
            return {t.spec.job_id: t.run() for t in self.trainers}
        return self._run_stacked(latest)

    def _run_stacked(self, latest: list) -> dict[str, dict[str, events.Final]]:
        lead = self.trainers[0]
        stack = BatchedCells(
            lead.spec.cells,
            lead.in_dim,
            lead.training,
            lead.poincare,
            lead.device,
            lead.dtype,
            groups=len(self.trainers),
            leaf_labels=lead.leaf_labels,
        )
        # Each job's global RNGs (which its checkpoints record) as its run alone would leave them: the
        # state after building its own cells; training itself never draws from them.
        begun, global_rngs = [], []
        for g, t in enumerate(self.trainers):
            begun.append(t.begin(GroupView(stack, g), latest[g]))
            global_rngs.append(capture_global_rngs())
        start_epoch = begun[0][2]
        n_batches = lead.n_batches
        rngs = [c.rng for cells, _, _ in begun for c in cells]
        on_host = lead.device.type != "cpu"
        features = lead.features
        for epoch in range(start_epoch + 1, lead.spec.epochs + 1):
            t0 = time.perf_counter()
            orders = [t.begin_epoch(epoch, cells, gen) for t, (cells, gen, _) in zip(self.trainers, begun, strict=True)]
            for b in range(n_batches):
                picked = [
                    t.batch(ep, b, cells)
                    for t, ep, (cells, _, _) in zip(self.trainers, orders, begun, strict=True)
                ]
                idx = torch.stack([i for i, _ in picked])  # [G, B]
                x = features[idx]  # [G, B, D]
                y = torch.stack([t.labels[i] for t, (i, _) in zip(self.trainers, picked, strict=True)])
                host_y = (
                    torch.stack([t.labels_cpu[c] for t, (_, c) in zip(self.trainers, picked, strict=True)])
                    if on_host
                    else None
                )
                losses = stack.step(x, y, rngs, host_y)
                for g, (t, (cells, _, _)) in enumerate(zip(self.trainers, begun, strict=True)):
                    t.add_losses(cells, losses[stack.group_cells(g)])
            seconds = time.perf_counter() - t0  # the whole stack's epoch, recorded by every job
            for g, (t, ep, (cells, gen, _)) in enumerate(zip(self.trainers, orders, begun, strict=True)):
                restore_global_rngs(global_rngs[g])
                t.end_epoch(ep, cells, gen, seconds)
                global_rngs[g] = capture_global_rngs()
        finals = {}
        for g, (t, (cells, _, _)) in enumerate(zip(self.trainers, begun, strict=True)):
            restore_global_rngs(global_rngs[g])
            finals[t.spec.job_id] = t.finish(cells)
        return finals
