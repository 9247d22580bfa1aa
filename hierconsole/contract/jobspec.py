"""What a worker process is asked to do: a JSON file the orchestrator writes and the worker reads.

The spec carries the study's preset itself (the frozen, validated objects of `config.preset`), so every
option has one definition and one default; what is particular to a job (its kind, seed, cells, the split
files it may read, the models it scores) is typed here. Paths are relative to the home folder
(`locations.resolve`), so a home can move between writing a spec and running it.

Kept free of torch and of the store, so the orchestrator (and the console) build specs without loading
either, and the same spec runs under every executor.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hierconsole.config.preset import Preset
from hierconsole.errors import HierconsoleError
from hierconsole.locations import resolve
from hierconsole.registry import component
from hierconsole.vocabulary import AGGREGATIONS, HIER_METRIC, Aggregation, JobKind, arm_parts

SPEC_VERSION = 2
"""Version 1 (the first release) restated the training options in a `hyper` block of its own."""


@dataclass(frozen=True)
class CellSpec:
    arm: str
    geometry: str  # a geometry component's name (euclidean, poincare, lorentz, product, module:Name)
    loss: str  # an objective component's name (regression, supcon, flat_supcon, module:Name; hier)
    tau: float | None = None  # the temperature of an objective that takes one

    @classmethod
    def of(cls, arm: str, tau: float | None = None) -> CellSpec:
        """The cell of an arm of built-in components; `tau` is kept for cells whose objective takes one."""
        geometry, loss = arm_parts(arm)
        return cls(arm, geometry, loss, tau if component("objective", loss).takes_tau else None)

    @classmethod
    def in_preset(cls, preset: Preset, arm: str, tau: float | None = None) -> CellSpec:
        """The cell of one of the preset's arms (one's own components included): `tau`, its geometry's
        temperature, is kept where the objective takes one (one's own objective: whenever there is one)."""
        geometry, objective = preset.factorial.cell(arm)
        keep = objective.takes_tau or not objective.builtin
        return cls(arm, geometry.name, objective.name, tau if keep else None)

    @property
    def key(self) -> str:
        """The cell's name within its job: a job holds each arm at most once (tuning jobs hold one tau)."""
        return self.arm


@dataclass(frozen=True)
class TestSplit:
    """One official-test query/gallery perturbation: its seed and its index file."""

    __test__ = False  # not a pytest test class
    seed: int
    path: str


@dataclass(frozen=True)
class ModelRef:
    """A trained cell that a scoring job evaluates: its run, training seed, cell and final weights."""

    run_id: str
    seed: int
    cell: CellSpec
    weights: str

    @property
    def embeddings_name(self) -> str:
        """File name of its stored test embeddings: `<job name>__<cell>.npy`."""
        job_name = self.run_id.split("/")[-2]
        return f"{job_name}__{self.cell.key}.npy"


@dataclass(frozen=True)
class BaselineRef:
    """An untrained baseline arm (vocabulary.BASELINES) a scoring job scores: its run and arm. It has no
    training seed; its rows are stored under vocabulary.BASELINE_SEED."""

    run_id: str
    arm: str

    @property
    def embeddings_name(self) -> str:
        """File name of its stored test embeddings: `baseline__<arm>.npy`."""
        return f"baseline__{self.arm}.npy"


@dataclass(frozen=True)
class Rescore:
    """A re-scoring job's aggregation and the evaluation's stored test embeddings."""

    aggregation: Aggregation
    embeddings_dir: str


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    job_id: str
    study_id: str
    kind: JobKind
    seed: int
    preset: Preset
    dataset_dir: str
    out_dir: str
    dataset_sha256: str | None = None
    """The content hash of the dataset the study was created with; a worker refuses other data."""
    cells: tuple[CellSpec, ...] = ()
    train_split: str | None = None
    """Index file (npz, part "fit") of the samples a training job fits on; for a scoring job with a pca
    baseline, the samples the PCA fits on (the final runs' training samples, never a test index)."""
    val_split: str | None = None
    """Index file (parts "query", "gallery") of the validation record or tuning score."""
    test_splits: tuple[TestSplit, ...] = ()
    """Official-test perturbations: scoring jobs only. The test seal is kept by never handing them to a
    training job (the `tuning_never_read_test` audit checks every spec)."""
    models: tuple[ModelRef, ...] = ()
    baselines: tuple[BaselineRef, ...] = ()
    """Scoring jobs: the baseline arms scored beside the models (preset `evaluation.baselines`)."""
    rescore: Rescore | None = None
    train_taxonomy: str | None = None
    """npz of the taxonomy a shuffle control trains on, one parent array per edge of the dataset's tree
    keyed by `Levels.edge_key` (three levels: leaf_middle, middle_high): training kinds only.
    Validation and test read the dataset's true taxonomy."""
    checkpoint_every: int = 1
    batched: bool = True
    """Train the cells as one stacked computation (`engine.batched`); False runs the per-cell reference."""

    # -- what the preset fixes for this job -----------------------------------------------------------
    @property
    def epochs(self) -> int:
        """The job's budget: tuning runs stop at the tuning budget, final runs at the study's endpoint."""
        if self.kind == JobKind.TUNE:
            return self.preset.temperature.tuning.epochs
        if self.kind == JobKind.FINAL:
            return self.preset.training.epochs
        return 0

    @property
    def val_every(self) -> int:
        """Validation period in epochs (0 = never): a tuning run is scored at its budget's end only."""
        if self.kind == JobKind.TUNE:
            return self.preset.temperature.tuning.epochs
        return self.preset.training.val_every

    def validates_at(self, epoch: int) -> bool:
        """Whether the job validates after `epoch` (a tuning run at its budget's end only)."""
        if self.kind == JobKind.TUNE:
            return epoch == self.preset.temperature.tuning.epochs
        return self.preset.training.validates_at(epoch)

    @property
    def selects_epoch(self) -> bool:
        """A final run that picks its checkpoint on validation (paper S9) rather than ending at a fixed epoch."""
        return self.kind == JobKind.FINAL and self.preset.training.select_epoch

    @property
    def selection_score(self) -> str:
        """The validation score that ranks epochs: the preset's for a selecting run, else the hier score."""
        return self.preset.training.selection_score if self.selects_epoch else HIER_METRIC

    @property
    def aggregation(self) -> Aggregation:
        """The aggregation this job scores under: a re-score's own, else the study's registered one."""
        return self.rescore.aggregation if self.rescore else self.preset.evaluation.aggregation

    @property
    def device(self) -> str:
        return self.preset.compute.device

    @property
    def threads(self) -> int:
        return self.preset.compute.threads_per_worker


    def resolved(self, home: Path) -> JobSpec:
        """The same spec with every stored (home-relative) path made a path on this machine."""

        def at(stored: str) -> str:
            return str(resolve(home, stored))

        return replace(
            self,
            dataset_dir=at(self.dataset_dir),
            out_dir=at(self.out_dir),
            train_split=None if self.train_split is None else at(self.train_split),
            val_split=None if self.val_split is None else at(self.val_split),
            train_taxonomy=None if self.train_taxonomy is None else at(self.train_taxonomy),
            test_splits=tuple(TestSplit(t.seed, at(t.path)) for t in self.test_splits),
            models=tuple(replace(m, weights=at(m.weights)) for m in self.models),
            rescore=None
            if self.rescore is None
            else replace(self.rescore, embeddings_dir=at(self.rescore.embeddings_dir)),
        )

    # -- serialising ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SPEC_VERSION,
            "job_id": self.job_id,
            "study_id": self.study_id,
            "kind": str(self.kind),
            "seed": self.seed,
            "preset": self.preset.to_dict(),
            "dataset_dir": self.dataset_dir,
            "dataset_sha256": self.dataset_sha256,
            "out_dir": self.out_dir,
            "cells": [_cell_dict(c) for c in self.cells],
            "train_split": self.train_split,
            "val_split": self.val_split,
            "train_taxonomy": self.train_taxonomy,
            "test_splits": [{"seed": t.seed, "path": t.path} for t in self.test_splits],
            "models": [
                {"run_id": m.run_id, "seed": m.seed, "cell": _cell_dict(m.cell), "weights": m.weights}
                for m in self.models
            ],
            "baselines": [{"run_id": b.run_id, "arm": b.arm} for b in self.baselines],
            "rescore": None
            if self.rescore is None
            else {"aggregation": self.rescore.aggregation, "embeddings_dir": self.rescore.embeddings_dir},
            "checkpoint_every": self.checkpoint_every,
            "batched": self.batched,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, source: str = "job spec") -> JobSpec:
        version = d.get("version", 1)
        if version != SPEC_VERSION:
            raise SpecError(
                f"{source}: job spec version {version}, but this hierconsole reads version {SPEC_VERSION}; "
                "run the job with the hierconsole that created its study"
            )
        rescore = d.get("rescore")
        if rescore is not None and rescore.get("aggregation") not in AGGREGATIONS:
            raise SpecError(
                f"{source}: rescore aggregation {rescore.get('aggregation')!r} is not one of {AGGREGATIONS}"
            )
        return cls(
            job_id=d["job_id"],
            study_id=d["study_id"],
            kind=JobKind(d["kind"]),
            seed=int(d["seed"]),
            preset=Preset.from_dict(d["preset"], source=f"{source} (preset)", recorded=True),
            dataset_dir=d["dataset_dir"],
            dataset_sha256=d.get("dataset_sha256"),
            out_dir=d["out_dir"],
            cells=tuple(CellSpec(**c) for c in d.get("cells", ())),
            train_split=d.get("train_split"),
            val_split=d.get("val_split"),
            train_taxonomy=d.get("train_taxonomy"),
            test_splits=tuple(TestSplit(int(t["seed"]), t["path"]) for t in d.get("test_splits", ())),
            models=tuple(
                ModelRef(m["run_id"], int(m["seed"]), CellSpec(**m["cell"]), m["weights"])
                for m in d.get("models", ())
            ),
            baselines=tuple(BaselineRef(b["run_id"], b["arm"]) for b in d.get("baselines", ())),
            rescore=None if rescore is None else Rescore(rescore["aggregation"], rescore["embeddings_dir"]),
            checkpoint_every=int(d.get("checkpoint_every", 1)),
            batched=bool(d.get("batched", True)),
        )

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(self.to_json())
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> JobSpec:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SpecError(f"{path}: cannot read the job spec: {exc}") from None
        return cls.from_dict(data, source=str(path))


class SpecError(HierconsoleError):
    """A job spec that cannot be read."""


def _cell_dict(c: CellSpec) -> dict[str, Any]:
    return {"arm": c.arm, "geometry": c.geometry, "loss": c.loss, "tau": c.tau}
