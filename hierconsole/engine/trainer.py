"""The factorial trainer: the cells of one seed trained in lockstep on one batch order.

Within a seed every cell starts from the same trainable state and sees the same batches in the same
order; what differs is only the geometry head and the loss. Each cell draws its dropout masks from its
own generator, seeded from (seed, cell), so a cell's trajectory does not depend on which other cells
train beside it. A job checkpoints at epoch boundaries and, restarted after a kill, continues from its
last checkpoint to a bit-identical end (on CPU with a fixed thread count).

Two interchangeable engines step the cells: the per-cell loop below (one Projector and optimiser per
cell, the reference) and ``batched.BatchedCells`` (all cells as one computation), chosen by
``JobSpec.batched``. Both write the same checkpoint and final-model layout: per-cell state dicts.

Every option comes from the job spec's preset (`spec.preset.training`, `.geometry.poincare`), resolved
against the dataset's levels (`config.level_plan`): training fits the trained levels' label columns,
validation scores every level; progress goes out as typed events (`contract.events`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from hierconsole.config.level_plan import level_weights, regression_targets, resolve_plan
from hierconsole.config.preset import HierConfig, PoincareConfig, Preset, TrainingConfig
from hierconsole.contract import events, layout
from hierconsole.contract.jobspec import CellSpec, JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.engine import checkpoints
from hierconsole.engine.batched import BatchedCells, CellStack
from hierconsole.engine.determinism import (
    capture_global_rngs,
    configure_device,
    derive_seed,
    reset_all_rngs,
    restore_global_rngs,
    state_sha256,
)
from hierconsole.engine.geometry import TRAIN_CLIP, Euclidean, Geometry, geometry_of
from hierconsole.engine.hier_recipe import authors_head, authors_optimizer, balanced_batches, clamp_gradients_
from hierconsole.engine.hier_style import HierObjective, hier_ball, hier_optimizer
from hierconsole.engine.losses import objective_of, regression_loss, taxonomy_supcon_loss
from hierconsole.engine.optim import Stepper, learning_rate, make_optimizer, set_learning_rate
from hierconsole.engine.projector import Projector, count_trainable
from hierconsole.engine.prototypes import PrototypeStack, initial_prototypes, owns_prototypes
from hierconsole.engine.retrieval import evaluate
from hierconsole.errors import InputError
from hierconsole.levels import LevelError, LevelPlan, Levels
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import (
    HIER_AUTHORS,
    HIER_METRIC,
    HIER_STYLE_LOSS,
    LOSSES,
    MAP,
    REGRESSION,
    SUPCON,
    TRAINING_KINDS,
    Aggregation,
    hier_score,
)

Emit = Callable[[events.Event], None]
VERIFY_SAMPLE = 256
# Fault injection for the crash-recovery tests: "EPOCH:BATCH" makes the worker SIGKILL itself right
# before that batch, the same way an OOM killer or a pulled plug would end it.
FAULT_ENV = "HIERCONSOLE_FAULT_KILL_AT"
# A pause for the tests that act on a worker mid-training (kill, cancel, a second shell): "EPOCH[,EPOCH...]"
# makes the worker write PAUSED_MARKER (the epoch) into its job folder right before each such epoch's first
# batch and wait there until it is killed or cancelled, or the marker is removed. A short run paused so is
# a deterministic window, where a run of thousands of epochs was only a long one. A worker whose test died
# without ending it goes on after PAUSE_LIMIT_SECONDS, as the long run would have ended, not never.
PAUSE_ENV = "HIERCONSOLE_FAULT_PAUSE_AT"
PAUSED_MARKER = "paused"
PAUSE_POLL_SECONDS = 0.05
PAUSE_LIMIT_SECONDS = 900.0


def _fault_point() -> tuple[int, int] | None:
    value = os.environ.get(FAULT_ENV)
    if not value:
        return None
    epoch, batch = value.split(":")
    return int(epoch), int(batch)


def _pause_epochs() -> set[int]:
    value = os.environ.get(PAUSE_ENV)
    return {int(epoch) for epoch in value.split(",")} if value else set()


class Cancelled(Exception):
    """The job was asked to stop; work since the last checkpoint is dropped."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    return torch.device(name)


class CellRng:
    """A cell's own dropout stream, swapped into the device's default generator around its forward.

    Dropout draws from the default generator; keeping a state per cell makes each cell's masks a
    function of (seed, cell) alone.
    """

    def __init__(self, device: torch.device, seed: int):
        self.device = device
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        self.state = gen.get_state()

    def _default(self) -> torch.Generator:
        if self.device.type == "cuda":
            return torch.cuda.default_generators[self.device.index or torch.cuda.current_device()]
        if self.device.type == "mps":  # pragma: no cover - no MPS in CI
            import torch.mps as mps

            return mps._get_default_mps_generator()
        return torch.default_generator

    @contextmanager
    def active(self):
        default = self._default()
        saved = default.get_state()
        default.set_state(self.state)
        try:
            yield
        finally:
            self.state = default.get_state()
            default.set_state(saved)


def cell_geometry(cell: CellSpec, poincare: PoincareConfig, hier: HierConfig | None = None) -> Geometry:
    """A cell's geometry head: the study's operating point, or HIER's own ball for the HIER-style cell."""
    if cell.loss == HIER_STYLE_LOSS:
        if hier is None:
            raise ValueError(f"cell {cell.key}: the HIER-style cell needs the preset's [baselines.hier]")
        return hier_ball(hier)
    return geometry_of(cell.geometry, poincare)


def authors_recipe(cell: CellSpec, hier: HierConfig | None) -> bool:
    """Whether ``cell`` is the HIER-style arm trained by the authors' recipe (engine.hier_recipe)."""
    return cell.loss == HIER_STYLE_LOSS and hier is not None and hier.recipe == HIER_AUTHORS


def build_projector(
    in_dim: int,
    cell: CellSpec,
    training: TrainingConfig,
    poincare: PoincareConfig,
    hier: HierConfig | None = None,
    seed: int = 0,
) -> Projector:
    """A cell's model. ``seed`` draws the initial weights of the authors' HIER head (the cells' initial
    state is loaded over theirs instead, ``initial_state``); a model about to load saved weights needs none."""
    geometry = cell_geometry(cell, poincare, hier)
    if authors_recipe(cell, hier):
        assert hier is not None
        return authors_head(in_dim, geometry, hier, seed)
    return Projector(
        in_dim, geometry, hidden=training.hidden, out_dim=training.out_dim, dropout=training.dropout
    )


def trunk_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The geometry-independent state (weights and BatchNorm buffers) that all cells share at init."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if not k.startswith("geometry.")}


def initial_state(seed: int, in_dim: int, training: TrainingConfig) -> dict[str, torch.Tensor]:
    """The trainable initial state every cell of seed `seed` starts from (the geometry holds none)."""
    reset_all_rngs(seed)
    base = Projector(
        in_dim, Euclidean(), hidden=training.hidden, out_dim=training.out_dim, dropout=training.dropout
    )
    return trunk_state(base)


def has_prototypes(cell: CellSpec) -> bool:
    """Whether the cell's objective owns leaf prototypes (`engine.prototypes`)."""
    return cell.loss not in LOSSES and cell.loss != HIER_STYLE_LOSS and owns_prototypes(objective_of(cell.loss))


def cell_loss(
    cell: CellSpec,
    dist: torch.Tensor,
    labels: torch.Tensor,
    training: TrainingConfig,
    prototypes: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """A cell's loss from its within-batch distances; ``prototypes``: for an objective that owns them, the
    keywords it takes besides (``prototype_dist``, ``leaf_labels``)."""
    if cell.loss == REGRESSION:
        return regression_loss(dist, labels, targets=training.regression_targets)
    if cell.loss == SUPCON:
        assert cell.tau is not None
        return taxonomy_supcon_loss(dist, labels, cell.tau, weights=training.level_weights)
    tau = None if cell.tau is None else torch.tensor(cell.tau, dtype=dist.dtype, device=dist.device)
    return objective_of(cell.loss).loss(dist, labels, tau=tau, training=training, **(prototypes or {}))


@torch.no_grad()
def embed(model: Projector, features: torch.Tensor, chunk: int = 8192) -> torch.Tensor:
    was_training = model.training
    model.eval()
    out = torch.cat([model(features[i : i + chunk]) for i in range(0, features.shape[0], chunk)])
    model.train(was_training)
    return out


def validation_scores(
    model: Projector,
    features: torch.Tensor,
    labels: torch.Tensor,
    query: torch.Tensor,
    gallery: torch.Tensor,
    aggregation: Aggregation,
    levels: Levels | None = None,
) -> dict[str, dict[str, float]]:
    z = embed(model, features[torch.cat([query, gallery])])
    zq, zg = z[: query.numel()], z[query.numel() :]
    result = evaluate(zq, zg, labels[query], labels[gallery], model.geometry, levels=levels)
    return result.aggregate(aggregation)


def study_plan(preset: Preset, levels: Levels) -> tuple[LevelPlan, TrainingConfig]:
    """The study's level plan on this dataset and the training options resolved for its trained levels:
    one Taxonomy-SupCon weight per trained level, K'+1 regression targets (three levels: the preset's own)."""
    plan = resolve_plan(preset, levels)
    training = preset.training
    weights, targets = level_weights(preset, plan), regression_targets(preset, plan)
    if weights != tuple(training.level_weights) or targets != tuple(training.regression_targets):
        training = replace(training, level_weights=weights, regression_targets=targets)
    return plan, training


def training_labels(
    spec: JobSpec, fs: FeatureSet, plan: LevelPlan | None = None, leaves: np.ndarray | None = None
) -> np.ndarray:
    """[N, K'] labels a training job fits: the dataset's, or those of the shuffle control's taxonomy, at
    the plan's trained levels (default: every level). ``leaves``: the labels of these leaf indices instead
    of the dataset's samples (the leaf table of an objective with leaf prototypes).

    The shuffle control's npz holds one parent array per edge of the dataset's tree, keyed by
    ``Levels.edge_key`` (three levels: ``leaf_middle``, ``middle_high``).
    """
    taxonomy = fs.taxonomy
    if spec.train_taxonomy is None:
        if spec.preset.controls.taxonomy_shuffle and spec.kind in TRAINING_KINDS:
            raise ValueError(
                f"{spec.job_id}: the preset asks for a taxonomy shuffle but the spec names no training taxonomy"
            )
        labels = fs.labels if leaves is None else taxonomy.labels(leaves)
    else:
        levels = taxonomy.levels
        with np.load(spec.train_taxonomy) as z:
            missing = [key for key in levels.edges if key not in z.files]
            if missing:
                raise ValueError(
                    f"{spec.train_taxonomy}: training taxonomy has no edge {', '.join(missing)} of the dataset's "
                    f"tree ({levels.describe()})"
                )
            parents = [z[key].astype(np.int64) for key in levels.edges]
        try:
            # The tree's own checks: an edge of the wrong length or an index outside the level above.
            shuffled = Taxonomy(taxonomy.nodes, tuple(parents), taxonomy.level_names)
        except InputError as exc:
            raise ValueError(
                f"{spec.train_taxonomy}: training taxonomy does not fit the dataset's tree: {'; '.join(exc.problems)}"
            ) from None
        labels = shuffled.labels(fs.labels[:, 0] if leaves is None else leaves)
    if plan is None or plan.trained_index == tuple(range(labels.shape[1])):
        return labels
    return labels[:, list(plan.trained_index)]


@dataclass
class Cell:
    spec: CellSpec
    model: Projector | None  # None on the batched path, where BatchedCells holds every cell's state
    optimizer: Stepper | None
    rng: CellRng
    updates: int = 0
    loss_sum: torch.Tensor | None = None
    batch_hash: Any = None
    best_epoch: int = -1
    best_score: float = float("-inf")
    history: list[float] = field(default_factory=list)
    objective: HierObjective | None = None
    """The HIER-style cell's loss and its proxies; None for a factorial cell."""
    own_batches: bool = False
    """The HIER-style cell under the authors' recipe: it trains on its own class-balanced batches after the
    cells' epoch (their batch order and update count are not its), at its own constant learning rate."""
    batches: int = 0
    """Batches per epoch this cell takes (its epoch loss is their mean)."""
    stack: int | None = None
    """The cell's index in the batched stack when the stacked engine steps it; None when it has its own
    model (the per-cell path, and the HIER-style cell on either path)."""
    prototypes: PrototypeStack | None = None
    """On the per-cell path, the leaf prototypes its objective owns (a stack of one); None otherwise."""


@dataclass(frozen=True)
class EpochOrder:
    """An epoch's batch order: CPU indices (batch hashes) and the device copy the batches index with."""

    epoch: int
    order_cpu: torch.Tensor
    used: torch.Tensor
    t0: float


def load_indices(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k].astype(np.int64) for k in z.files}


class FactorialTrainer:
    """Trains the cells of one job in lockstep. `emit` receives its progress as typed events.

    The spec's paths must be usable as they are (the worker resolves them against the home first).
    """

    def __init__(
        self,
        spec: JobSpec,
        emit: Emit,
        should_stop: Callable[[], bool] = lambda: False,
        *,
        dtype: torch.dtype = torch.float32,
        dataset: FeatureSet | None = None,
    ):
        """``dataset``: the spec's feature set, already loaded and checked (a stacked run loads it once)."""
        self.spec = spec
        # float64 exists for the tests that hold the batched path to the reference at 1e-9.
        self.dtype = dtype
        self.batched: CellStack | None = None
        self.emit = emit
        self.should_stop = should_stop
        self.out = Path(spec.out_dir)
        self.ckpt_dir = self.out / layout.CHECKPOINTS
        self.poincare = spec.preset.geometry.poincare
        self.device = resolve_device(spec.device)
        self.device_settings = configure_device(self.device)  # before the first kernel; CPU: a no-op
        torch.set_num_threads(max(1, spec.threads))
        fs = dataset or FeatureSet.load(Path(spec.dataset_dir), expect_sha256=spec.dataset_sha256)
        # The study's levels on this dataset: which label columns train, which levels the hier score
        # averages, and the loss constants of the trained depth.
        self.levels = fs.taxonomy.levels
        try:
            self.plan, self.training = study_plan(spec.preset, self.levels)
        except LevelError as exc:
            raise ValueError(f"{spec.job_id}: {exc}") from exc
        labels = training_labels(spec, fs, self.plan)
        self.features = torch.from_numpy(np.ascontiguousarray(fs.features)).to(self.device, dtype)
        self.labels = torch.from_numpy(np.ascontiguousarray(labels)).to(self.device)
        # Validation scores every level of the true taxonomy, even when training fits a shuffled one
        # (paper S9) or a subset of the levels.
        self.true_labels = (
            self.labels
            if spec.train_taxonomy is None and labels.shape[1] == self.levels.k
            else torch.from_numpy(np.ascontiguousarray(fs.labels)).to(self.device)
        )
        self.in_dim = int(fs.features.shape[1])
        self.n_leaves = int(fs.taxonomy.n_leaves)
        # Each leaf's labels at the trained levels, for an objective with leaf prototypes (soft-label CE).
        leaf_table = training_labels(spec, fs, self.plan, np.arange(self.n_leaves))
        self.leaf_labels = torch.from_numpy(np.ascontiguousarray(leaf_table)).to(self.device)
        self.hier = spec.preset.baselines.hier
        # Batch order, batch hashes and host-side label decisions come from CPU copies, so an accelerator
        # never waits for a device-to-host copy inside the epoch.
        self.labels_cpu = torch.from_numpy(np.ascontiguousarray(labels))
        if spec.train_split is None:
            raise ValueError(f"{spec.job_id}: a training job needs a train split")
        self.train_idx_cpu = torch.from_numpy(load_indices(spec.train_split)["fit"])
        self.train_idx = self.train_idx_cpu.to(self.device)
        self.val: tuple[torch.Tensor, torch.Tensor] | None = None
        if spec.val_split is not None:
            parts = load_indices(spec.val_split)
            self.val = (
                torch.from_numpy(parts["query"]).to(self.device),
                torch.from_numpy(parts["gallery"]).to(self.device),
            )

    # -- set-up -------------------------------------------------------------------------------------
    def _build_cells(self, batched: bool, stack: CellStack | None = None) -> list[Cell]:
        """The job's cells from the seed's initial state; on the batched path they live in ``stack``
        (a new BatchedCells of this job's cells unless given: a stacked run's view of this job's group)."""
        training = self.training
        init = initial_state(self.spec.seed, self.in_dim, training)
        cells = []
        for cs in self.spec.cells:
            model = build_projector(self.in_dim, cs, training, self.poincare, self.hier, self.spec.seed)
            model = model.to(self.device, self.dtype)
            rng = CellRng(self.device, derive_seed(self.spec.seed, "dropout", cs.key))
            if authors_recipe(cs, self.hier):
                # Its own head, init, optimiser and batches (engine.hier_recipe); the cells' state is not its.
                objective = HierObjective(
                    self.hier, self.n_leaves, self.hier.embedding, self.spec.seed, hier_ball(self.hier)
                ).to(self.device, self.dtype)
                optimizer = authors_optimizer(model, objective, self.hier)
                cells.append(Cell(cs, model, optimizer, rng, objective=objective, own_batches=True))
                continue
            missing, unexpected = model.load_state_dict(init, strict=False)
            assert not unexpected and all(k.startswith("geometry.") for k in missing), (missing, unexpected)
            if cs.loss == HIER_STYLE_LOSS:
                # Never stacked: its loss and proxies are its own (engine.hier_style); it keeps its own model.
                objective = HierObjective(
                    self.hier, self.n_leaves, training.out_dim, self.spec.seed, hier_ball(self.hier)
                ).to(self.device, self.dtype)
                cells.append(
                    Cell(cs, model, hier_optimizer(model, objective, training), rng, objective=objective)
                )
                continue
            params = [p for p in model.parameters() if p.requires_grad]
            opt = None if batched else make_optimizer(params, training, stacked=False)
            cells.append(Cell(cs, model, opt, rng))
            if not batched and has_prototypes(cs):
                cells[-1].prototypes = PrototypeStack(1, self.n_leaves, training.out_dim, training, self.device, self.dtype)
                cells[-1].prototypes.load(slice(0, 1), [self._initial_prototypes])
        stacked = [c for c in cells if c.objective is None]
        if batched and stacked:
            if stack is not None and len(stacked) != len(cells):
                raise ValueError(f"{self.spec.job_id}: a stacked run cannot hold the HIER-style cell")
            self.batched = stack or BatchedCells(
                tuple(c.spec for c in stacked),
                self.in_dim,
                training,
                self.poincare,
                self.device,
                self.dtype,
                leaf_labels=self.leaf_labels,
            )
            # Every cell was just built with its model; they are dropped only below.
            self.batched.load(
                [cast(Projector, c.model).state_dict() for c in stacked],
                [{"state": {}} for _ in stacked],
                [self._initial_prototypes if has_prototypes(c.spec) else None for c in stacked],
            )
            for j, c in enumerate(stacked):
                c.model = c.optimizer = None  # the stacked state is the only copy from here on
                c.stack = j
        return cells

    # -- per-cell views (the same on both paths) -----------------------------------------------------
    def _model(self, i: int, c: Cell) -> Projector:
        """Cell i's model: the live one on the reference path, a copy of its state on the batched path."""
        if self.batched is not None and c.stack is not None:
            return self.batched.projector(c.stack)
        assert c.model is not None
        return c.model

    def _model_state(self, i: int, c: Cell) -> dict[str, torch.Tensor]:
        if self.batched is not None and c.stack is not None:
            return self.batched.cell_state(c.stack)
        assert c.model is not None
        return c.model.state_dict()

    def _optimizer_state(self, i: int, c: Cell) -> dict[str, Any]:
        if self.batched is not None and c.stack is not None:
            return self.batched.optimizer_state(c.stack)
        assert c.optimizer is not None
        return c.optimizer.state_dict()

    def _prototype_state(self, c: Cell) -> dict[str, Any] | None:
        """The cell's leaf prototypes and their optimiser state (None for a cell without them)."""
        if self.batched is not None and c.stack is not None:
            return self.batched.prototype_state(c.stack)
        return None if c.prototypes is None else c.prototypes.state(0)

    @functools.cached_property
    def _initial_prototypes(self) -> dict[str, Any]:
        """The prototypes every prototype cell of this seed starts from, in the per-cell state layout (drawn
        once; each cell's load copies them)."""
        value = initial_prototypes(self.spec.seed, self.n_leaves, self.training.out_dim)
        return {"value": value.to(self.device, self.dtype), "optimizer": {}}

    def _objective_params(self, c: Cell) -> int:
        """Parameters the cell's objective adds to its projector's: leaf prototypes, HIER's proxies."""
        if c.objective is not None:
            return count_trainable(c.objective)
        # One raw prototype of the projector's output width per leaf (engine.prototypes).
        return self.n_leaves * self.training.out_dim if has_prototypes(c.spec) else 0

    def _batch_generator(self) -> torch.Generator:
        gen = torch.Generator(device="cpu")
        gen.manual_seed(self.spec.seed)
        return gen

    # -- checkpoints --------------------------------------------------------------------------------
    def _checkpoint_payload(self, epoch: int, cells: list[Cell], gen: torch.Generator) -> dict[str, Any]:
        return {
            "epoch": epoch,
            "batch_generator": gen.get_state(),
            "global_rngs": capture_global_rngs(),
            "batched": self.batched is not None,
            "cells": {
                c.spec.key: {
                    "model": self._model_state(i, c),
                    "optimizer": self._optimizer_state(i, c),
                    "rng": c.rng.state,
                    "updates": c.updates,
                    "best_epoch": c.best_epoch,
                    "best_score": c.best_score,
                    "history": torch.tensor(c.history, dtype=torch.float64),
                    **({} if c.objective is None else {"objective": c.objective.checkpoint_state()}),
                    **({} if (p := self._prototype_state(c)) is None else {"prototypes": p}),
                }
                for i, c in enumerate(cells)
            },
        }

    def _restore(self, payload: dict[str, Any], cells: list[Cell], gen: torch.Generator) -> int:
        gen.set_state(payload["batch_generator"])
        restore_global_rngs(payload["global_rngs"])
        if self.batched is not None:
            states = [payload["cells"][c.spec.key] for c in cells if c.stack is not None]
            self.batched.load(
                [s["model"] for s in states], [s["optimizer"] for s in states], [s.get("prototypes") for s in states]
            )
        for c in cells:
            s = payload["cells"][c.spec.key]
            if c.model is not None and c.optimizer is not None:
                c.model.load_state_dict(s["model"])
                c.optimizer.load_state_dict(s["optimizer"])
            if c.objective is not None:
                c.objective.load_checkpoint_state(s["objective"])
            if c.prototypes is not None:
                c.prototypes.load(slice(0, 1), [s["prototypes"]])
            c.rng.state = s["rng"]
            c.updates = int(s["updates"])
            c.best_epoch = int(s["best_epoch"])
            c.best_score = float(s["best_score"])
            c.history = s["history"].tolist()
        return int(payload["epoch"])

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> dict[str, events.Final]:
        cells, gen, start_epoch = self.begin()
        for epoch in range(start_epoch + 1, self.spec.epochs + 1):
            ep = self.begin_epoch(epoch, cells, gen)
            for b in range(self.n_batches):
                idx, idx_cpu = self.batch(ep, b, cells)
                x, y = self.features[idx], self.labels[idx]
                if self.batched is not None:
                    host_y = self.labels_cpu[idx_cpu] if self.device.type != "cpu" else None
                    self._step_batched([c for c in cells if c.stack is not None], x, y, host_y)
                for c in cells:
                    if c.stack is None and not c.own_batches:
                        self._step(c, x, y)
            self.own_batches_epoch(epoch, cells)
            self.end_epoch(ep, cells, gen)
        return self.finish(cells)

    def latest_checkpoint(self) -> tuple[tuple[int, dict[str, Any]] | None, list[str]]:
        """The newest usable checkpoint (epoch, payload) or None, and notes on the unusable ones."""
        return checkpoints.load_latest(self.ckpt_dir)

    @staticmethod
    def checkpoint_is_batched(payload: dict[str, Any]) -> bool:
        # Checkpoints from before the batched path have no flag and were per-cell.
        return bool(payload.get("batched", False))

    def begin(
        self,
        stack: CellStack | None = None,
        latest: tuple[tuple[int, dict[str, Any]] | None, list[str]] | None = None,
    ) -> tuple[list[Cell], torch.Generator, int]:
        """Build (or restore) the cells and the batch generator; announce them. Returns the epoch done.

        ``stack`` and ``latest`` come from a stacked run: the view of this job's cells in the shared stack
        and the checkpoint it already read.
        """
        latest_ckpt, skipped = self.latest_checkpoint() if latest is None else latest
        # A resumed job stays on the engine that wrote its checkpoint: the two engines round differently,
        # so switching midway would break the bit-identity of a resumed run with an uninterrupted one.
        batched = self.checkpoint_is_batched(latest_ckpt[1]) if latest_ckpt is not None else self.spec.batched
        if stack is not None and not batched:
            raise ValueError(f"{self.spec.job_id}: a stacked run needs the batched engine")
        cells = self._build_cells(batched, stack)
        gen = self._batch_generator()
        for i, c in enumerate(cells):
            model = self._model(i, c)
            self.emit(
                events.Init(
                    cell=c.spec.key,
                    arm=c.spec.arm,
                    tau=c.spec.tau,
                    geometry=c.spec.geometry,
                    loss=c.spec.loss,
                    trainable_params=count_trainable(model),
                    objective_params=self._objective_params(c),
                    init_sha256=state_sha256(model),
                )
            )
        start_epoch = 0
        if latest_ckpt is not None:
            start_epoch = self._restore(latest_ckpt[1], cells, gen)
            self.emit(events.Resume(epoch=start_epoch, notes=tuple(skipped)))
        elif skipped:
            # Checkpoints existed but none was usable: a restart from scratch the user must be told of.
            self.emit(events.Resume(epoch=0, notes=(*skipped, checkpoints.RESTART_NOTE)))
        n = self.train_idx.numel()
        bs = self.training.batch_size
        self.n_batches = n // bs if self.training.drop_last else -(-n // bs)
        if self.n_batches == 0:
            raise ValueError(f"{n} training samples cannot fill one batch of {bs} with drop_last")
        for c in cells:
            c.batches = n // self.hier.batch_size if c.own_batches else self.n_batches
            if c.own_batches and c.batches == 0:
                raise ValueError(
                    f"{n} training samples cannot fill one class-balanced batch of baselines.hier.batch_size = "
                    f"{self.hier.batch_size}"
                )
        self._fault = _fault_point()
        self._pauses = _pause_epochs()
        return cells, gen, start_epoch

    def begin_epoch(self, epoch: int, cells: list[Cell], gen: torch.Generator) -> EpochOrder:
        """Set the epoch's learning rate, draw its batch order and zero the cells' running sums."""
        t0 = time.perf_counter()
        self._schedule(cells, epoch, self.spec.epochs)
        n, bs = self.train_idx.numel(), self.training.batch_size
        perm = torch.randperm(n, generator=gen)
        order_cpu = self.train_idx_cpu[perm]
        order = order_cpu.to(self.device)
        used = order[: self.n_batches * bs] if self.training.drop_last else order
        for c in cells:
            if c.stack is None:
                c.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
            c.batch_hash = hashlib.sha256()
        # The batched path sums its cells' losses in one vector: one addition per step, not one per cell.
        n_stacked = sum(c.stack is not None for c in cells)
        self._loss_sums = torch.zeros(n_stacked, dtype=torch.float64, device=self.device)
        return EpochOrder(epoch, order_cpu, used, t0)

    def batch(self, ep: EpochOrder, b: int, cells: list[Cell]) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch ``b`` of the epoch as (device indices, CPU indices), recorded in each cell's batch hash."""
        if self.should_stop():
            raise Cancelled(f"stopped in epoch {ep.epoch}")
        if self._fault == (ep.epoch, b):
            os.kill(os.getpid(), signal.SIGKILL)
        if b == 0 and ep.epoch in self._pauses:
            self._wait_paused(ep.epoch)
        bs = self.training.batch_size
        idx = ep.used[b * bs : (b + 1) * bs]
        idx_cpu = ep.order_cpu[b * bs : (b + 1) * bs]
        idx_bytes = idx_cpu.numpy().tobytes()
        for c in cells:
            if not c.own_batches:
                c.batch_hash.update(idx_bytes)
        return idx, idx_cpu

    def _wait_paused(self, epoch: int) -> None:
        """The pause hook: say so in the job folder, then wait for the marker's removal or a stop."""
        marker = self.out / PAUSED_MARKER
        marker.write_text(f"{epoch}\n")
        deadline = time.monotonic() + PAUSE_LIMIT_SECONDS
        while marker.exists() and time.monotonic() < deadline:
            if self.should_stop():
                marker.unlink(missing_ok=True)
                raise Cancelled(f"stopped in epoch {epoch}")
            time.sleep(PAUSE_POLL_SECONDS)
        marker.unlink(missing_ok=True)

    def own_batches_epoch(self, epoch: int, cells: list[Cell]) -> None:
        """One epoch of every cell with its own batches (the authors' HIER recipe): class-balanced batches
        of the training rows, a function of (seed, epoch), so a resumed epoch draws the same ones."""
        mine = [c for c in cells if c.own_batches]
        if not mine:
            return
        leaf = self.labels_cpu[self.train_idx_cpu, 0].numpy()
        batches = balanced_batches(leaf, self.hier.batch_size, self.hier.per_class, self.spec.seed, epoch)
        for positions in batches:
            if self.should_stop():
                raise Cancelled(f"stopped in epoch {epoch}")
            idx_cpu = self.train_idx_cpu[torch.from_numpy(positions)]
            idx = idx_cpu.to(self.device)
            x, y = self.features[idx], self.labels[idx]
            for c in mine:
                c.batch_hash.update(idx_cpu.numpy().tobytes())
                self._step(c, x, y)

    def end_epoch(
        self, ep: EpochOrder, cells: list[Cell], gen: torch.Generator, seconds: float | None = None
    ) -> None:
        """The epoch's losses (one device-to-host copy), validation when due, and its checkpoint.

        ``seconds``: the epoch's training time, when the caller measured it (a stacked run, for the stack).
        """
        spec, epoch, epochs = self.spec, ep.epoch, self.spec.epochs
        seconds = time.perf_counter() - ep.t0 if seconds is None else seconds
        stacked_sums = self._loss_sums.tolist() if self.batched is not None else []
        sums = [
            stacked_sums[c.stack] if c.stack is not None else float(cast(torch.Tensor, c.loss_sum))
            for c in cells
        ]
        for c, total in zip(cells, sums, strict=True):
            loss = total / c.batches
            c.history.append(loss)
            self.emit(
                events.Epoch(
                    cell=c.spec.key,
                    epoch=epoch,
                    epochs=epochs,
                    train_loss=loss,
                    updates=c.updates,
                    batch_sha256=c.batch_hash.hexdigest(),
                    seconds=seconds,
                )
            )
        if self.val is not None and spec.validates_at(epoch):
            self._validate(cells, epoch)
        if epoch % spec.checkpoint_every == 0 or epoch == epochs:
            digest = checkpoints.save_checkpoint(
                self.ckpt_dir, epoch, self._checkpoint_payload(epoch, cells, gen)
            )
            self.emit(events.Checkpoint(epoch=epoch, sha256=digest))

    def _schedule(self, cells: list[Cell], epoch: int, epochs: int) -> None:
        """Set the epoch's learning rate under the preset's schedule (a constant one never changes it)."""
        lr = learning_rate(self.training, epoch, epochs)
        optimizers: list[Stepper | None] = list(self.batched.steppers) if self.batched is not None else []
        # The authors' HIER recipe keeps its own constant learning rates.
        optimizers += [c.optimizer for c in cells if c.stack is None and not c.own_batches]
        optimizers += [c.prototypes.optimizer for c in cells if c.prototypes is not None]
        for opt in optimizers:
            assert opt is not None
            set_learning_rate(opt, lr)

    def _step_batched(
        self, cells: list[Cell], x: torch.Tensor, y: torch.Tensor, host_y: torch.Tensor | None
    ) -> None:
        assert self.batched is not None
        self.add_losses(cells, self.batched.step(x, y, [c.rng for c in cells], host_y))

    def add_losses(self, cells: list[Cell], losses: torch.Tensor) -> None:
        """Count one update of every cell and add its [C] batch losses to the epoch's sums (on device)."""
        for c in cells:
            c.updates += 1
        self._loss_sums += losses.to(torch.float64)

    def _step(self, c: Cell, x: torch.Tensor, y: torch.Tensor) -> None:
        training = self.training
        assert c.model is not None and c.optimizer is not None
        c.model.train()
        with c.rng.active():
            z = c.model(x)
        if c.objective is not None:
            loss = c.objective(z, y[:, 0])  # HIER-style: leaf labels only
        else:
            dist = c.model.geometry.pairwise(z, z, clip_max=TRAIN_CLIP)
            own = None
            if c.prototypes is not None:
                to_leaves = c.prototypes.distances(c.model.geometry, z.unsqueeze(0), slice(0, 1), TRAIN_CLIP)
                own = {"prototype_dist": to_leaves[0], "leaf_labels": self.leaf_labels}
            loss = cell_loss(c.spec, dist, y, training, own)
        c.optimizer.zero_grad(set_to_none=True)
        if c.prototypes is not None:
            c.prototypes.zero_grad()
        loss.backward()
        if c.own_batches:
            # The authors' recipe clamps every gradient element-wise, the head's and the proxies' alike.
            assert c.objective is not None
            clamp_gradients_((c.model, c.objective), c.objective.config.grad_value_clip)
        else:
            # The projector is clipped like every cell's; the proxies as HIER clips them (element-wise).
            torch.nn.utils.clip_grad_norm_(
                [p for p in c.model.parameters() if p.requires_grad], training.grad_clip
            )
            if c.objective is not None:
                c.objective.clip_gradients_()
        c.optimizer.step()
        if c.prototypes is not None:
            c.prototypes.step()
        c.updates += 1
        assert c.loss_sum is not None  # set at the start of the epoch
        c.loss_sum += loss.detach().to(torch.float64)

    def _validate(self, cells: list[Cell], epoch: int) -> None:
        assert self.val is not None
        q, g = self.val
        batched_z = None
        if self.batched is not None:
            batched_z = self.batched.embed(self.features[torch.cat([q, g])])
        for i, c in enumerate(cells):
            if batched_z is not None and c.stack is not None:
                assert self.batched is not None
                zq, zg = batched_z[c.stack][: q.numel()], batched_z[c.stack][q.numel() :]
                result = evaluate(
                    zq,
                    zg,
                    self.true_labels[q],
                    self.true_labels[g],
                    self.batched.geometry(c.stack),
                    levels=self.levels,
                )
                metrics = result.aggregate(self.spec.aggregation)
            else:
                assert c.model is not None
                metrics = validation_scores(
                    c.model, self.features, self.true_labels, q, g, self.spec.aggregation, self.levels
                )
            score = selection_value(metrics, self.spec.selection_score, self.plan.hier)
            if self.spec.selects_epoch:
                # Kept, not retrained: with a constant learning rate (the only schedule; one that read the
                # ceiling would have to retrain instead) nothing in epochs 1..E depends on the ceiling, so
                # this state is bit-identical to a fresh run of E epochs (tests/engine/test_lockstep.py).
                checkpoints.save_payload(
                    self.out / layout.candidate_model(c.spec, epoch),
                    {"model": self._model_state(i, c), "epoch": epoch},
                )
            # Strictly better only: a tie keeps the earlier epoch, so the choice never depends on noise order.
            # The seed's own best is a record only (the study freezes one epoch per arm); a selecting run
            # already holds that state among its candidates, so no copy of it is written.
            if score > c.best_score:
                c.best_score, c.best_epoch = score, epoch
                if not self.spec.selects_epoch:
                    checkpoints.save_payload(
                        self.out / layout.best_model(c.spec),
                        {"model": self._model_state(i, c), "epoch": epoch},
                    )
            self.emit(
                events.Validation(
                    cell=c.spec.key,
                    epoch=epoch,
                    aggregation=self.spec.aggregation,
                    metrics=_float_metrics(metrics),
                    score=score,
                )
            )

    def finish(self, cells: list[Cell]) -> dict[str, events.Final]:
        if self.spec.selects_epoch:
            unscored = [c.spec.key for c in cells if c.best_epoch < 0]
            if unscored:
                raise ValueError(
                    f"{self.spec.job_id}: cell(s) {', '.join(unscored)} have no finite "
                    f"{self.spec.selection_score} at any candidate epoch, so no epoch can be selected"
                )
        verify = self.features[self.train_idx[: min(VERIFY_SAMPLE, self.train_idx.numel())]]
        summary = {}
        for i, c in enumerate(cells):
            model = self._model(i, c)
            path = self.out / layout.final_model(c.spec)
            checkpoints.save_payload(path, {"model": model.state_dict()})
            fresh = build_projector(self.in_dim, c.spec, self.training, self.poincare, self.hier)
            fresh = fresh.to(self.device, self.dtype)
            fresh.load_state_dict(checkpoints.load_payload(path)["model"])
            diff = (embed(fresh, verify) - embed(model, verify)).abs().max().item()
            event = events.Final(
                cell=c.spec.key,
                final_sha256=state_sha256(model),
                updates=c.updates,
                reload_max_diff=diff,
                best_epoch=c.best_epoch if c.best_epoch >= 0 else None,
                best_score=c.best_score if c.best_epoch >= 0 else None,
            )
            self.emit(event)
            summary[c.spec.key] = event
        return summary


def selection_value(
    metrics: dict[str, dict[str, float]], score: str, hier: Sequence[str] | None = None
) -> float:
    """A validation score by name: the hier score (`hier_mAP`, over the ``hier`` levels; default every
    level above the leaf) or one level's mAP (`middle_mAP`); NaN (never selected) when the level has no
    valid query."""
    if score == HIER_METRIC:
        maps = {level: m[MAP] for level, m in metrics.items()}
        return hier_score(maps, tuple(metrics)[1:] if hier is None else hier)
    # The metric follows the last "_" (level codes have none): `genus_mAP`, `middle_R@5`.
    level, _, metric = score.rpartition("_")
    value = metrics.get(level, {}).get(metric)
    return math.nan if value is None else float(value)


def _float_metrics(metrics: dict[str, dict[str, float | int]]) -> dict[str, dict[str, float]]:
    return {level: {k: float(v) for k, v in m.items()} for level, m in metrics.items()}
